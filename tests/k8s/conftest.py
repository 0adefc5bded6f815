"""The local Kubernetes control plane (hack/controlplane) for tests marked `k8s`, and its node
for tests marked `node`.

The binaries are built once collection is over, before any test runs, so that a cold build (tens of
minutes) is not cut short by a test's timeout; a failed build fails every k8s test with its reason.
Then one control plane per session: etcd, kube-apiserver and kube-controller-manager on free
loopback ports, taken down at the end (and by its watchdog if this process dies first). The first
test that asks for `node` adds kube-scheduler, kubelet and containerd to it (`add-node`); the node
is removed at the end of the session (by the same watchdog if the session is killed).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.k8s import operator_bench
from tests.k8s.operator_bench import Bench

ROOT = Path(__file__).resolve().parents[2]
CONTROLPLANE = ROOT / "hack" / "controlplane"
BUILD_FAILURE = pytest.StashKey[str]()
NEEDS_NODE = pytest.StashKey[bool]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the node needs the control plane: `-m "not k8s"` leaves it out too."""
    for item in items:
        if item.get_closest_marker("node") and not item.get_closest_marker("k8s"):
            item.add_marker(pytest.mark.k8s)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Note whether any selected test needs the node: the build before the first test that
    needs the control plane builds what is missing for both."""
    session.config.stash[NEEDS_NODE] = any(
        item.get_closest_marker("node") for item in session.items
    )


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Before this process's first test that needs the control plane, build the binaries (a
    no-op when cached; it waits for a build already under way, such as the one ``hack/test``
    starts beside the tests), outside any test's timeout: a cold build takes minutes. The tests
    that need no control plane run meanwhile on the other test processes."""
    config = item.config
    capture = config.pluginmanager.getplugin("capturemanager")
    if item.get_closest_marker("k8s") and BUILD_FAILURE not in config.stash:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            config.stash[BUILD_FAILURE] = build(config.stash.get(NEEDS_NODE, False))
    if item.path.name in IMAGE_MODULES and IMAGE_BUILT not in config.stash:
        config.stash[IMAGE_BUILT] = True  # the module's fixture builds it again on a failure
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            subprocess.run([str(ROOT / "hack" / "image")], stdout=subprocess.DEVNULL, check=False)
    yield


IMAGE_MODULES = frozenset({"test_image.py", "test_chart_e2e.py", "test_quickstart.py"})
"""The modules whose fixtures run ``hack/image``: it runs once before their first test, outside
its timeout (a cold image build takes minutes; then theirs is a no-op)."""
IMAGE_BUILT = pytest.StashKey[bool]()


def build(node: bool = False) -> str:
    """Run `hack/controlplane build [--node]`, showing its progress; return "" or why it failed."""
    last = collections.deque[str](maxlen=60)
    argv = [str(CONTROLPLANE), "build", *(["--node"] if node else [])]
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        for line in proc.stdout or ():
            sys.stderr.write(line)
            last.append(line)
    if proc.returncode == 0:
        return ""
    return f"hack/controlplane build failed (exit {proc.returncode}):\n{''.join(last)}"


@dataclasses.dataclass(frozen=True)
class ControlPlane:
    """A running control plane: its kubeconfig, its tools, and an environment that uses them."""

    state_dir: Path
    server: str
    kubeconfig: Path
    bin: dict[str, Path]
    env: dict[str, str]

    @property
    def kubectl_path(self) -> Path:
        return self.bin["kubectl"]

    @property
    def helm_path(self) -> Path:
        return self.bin["helm"]

    def run(
        self, *argv: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run a command in this control plane's environment; raise with its output on failure."""
        result = subprocess.run(
            argv, input=input, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{' '.join(argv)} exited {result.returncode}\n{result.stdout}{result.stderr}"
            )
        return result

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.kubectl_path), *args, **kwargs)

    def helm(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.helm_path), *args, **kwargs)

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def env_shell(self, script: str, home: str | None = None) -> subprocess.CompletedProcess[str]:
        """``script`` in a bash (-euo pipefail) that first evals ``hack/controlplane env`` for
        this control plane, from a bare PATH (and ``home`` as HOME), as a user's shell would;
        not checked."""
        setup = f'eval "$(hack/controlplane env --state-dir {self.state_dir})"\n'
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", setup + script],
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", **({"HOME": home} if home else {})},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    @classmethod
    def load(cls, state_dir: Path, home: Path) -> ControlPlane:
        """Read what `up` recorded in <state-dir>/state.json."""
        state = json.loads((state_dir / "state.json").read_text())
        env = dict(os.environ)
        env.update(state["env"])
        env["PATH"] = f"{state['env']['FERRYMAN_CONTROLPLANE_BIN']}{os.pathsep}{env['PATH']}"
        # kubectl's discovery cache and helm's homes stay out of the user's.
        env["KUBECACHEDIR"] = str(home / "kube-cache")
        for kind in ("CACHE", "CONFIG", "DATA"):
            env[f"HELM_{kind}_HOME"] = str(home / f"helm-{kind.lower()}")
        bins = {name: Path(path) for name, path in state["bin"].items()}
        return cls(state_dir, state["server"], Path(state["kubeconfig"]), bins, env)


def controlplane_command(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CONTROLPLANE), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@contextlib.contextmanager
def running_controlplane(state_dir: Path, *up_args: str) -> Iterator[ControlPlane]:
    """`hack/controlplane up` into state_dir; always `down` afterwards."""
    try:
        result = controlplane_command("up", "--state-dir", str(state_dir), *up_args)
        if result.returncode != 0:
            pytest.fail(f"hack/controlplane up failed:\n{result.stderr}", pytrace=False)
        yield ControlPlane.load(state_dir, state_dir.parent / f"{state_dir.name}-home")
    finally:
        down = controlplane_command("down", "--state-dir", str(state_dir), timeout=120)
        assert down.returncode == 0, down.stderr


def require_build(request: pytest.FixtureRequest) -> None:
    """Fail (never skip) with the reason the build failed."""
    failure = request.config.stash.get(BUILD_FAILURE, "")
    if failure:
        pytest.fail(failure, pytrace=False)


@pytest.fixture(scope="session")
def controlplane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """One control plane for the session, with kube-controller-manager."""
    require_build(request)
    state_dir = tmp_path_factory.mktemp("controlplane") / "state"
    with running_controlplane(state_dir, "--watch-pid", str(os.getpid())) as plane:
        yield plane


@pytest.fixture
def namespace(controlplane: ControlPlane) -> Iterator[str]:
    """A fresh namespace, deleted afterwards (without waiting for its finalization)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    controlplane.kubectl("create", "namespace", name)
    yield name
    controlplane.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def api_client(controlplane: ControlPlane) -> Iterator[Any]:
    """The Python `kubernetes` client, configured from the control plane's kubeconfig."""
    from kubernetes import config

    client = config.new_client_from_config(config_file=str(controlplane.kubeconfig))
    with client:
        yield client


@pytest.fixture(scope="session")
def wait_for() -> Callable[..., Any]:
    """`wait_for(check, timeout=30, what=None, interval=0.25)`: poll until check() is truthy
    (the controllers are asynchronous); net.wait_for at the control plane's pace."""
    return operator_bench.eventually


@pytest.fixture(scope="session")
def start_controlplane(
    request: pytest.FixtureRequest,
) -> Callable[..., contextlib.AbstractContextManager[ControlPlane]]:
    """`with start_controlplane(state_dir, *up_args) as plane:` another control plane."""
    require_build(request)
    return running_controlplane


@pytest.fixture(scope="session")
def controlplane_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`controlplane_cli("env", "--state-dir", ...)`: run hack/controlplane, capture its output."""
    return controlplane_command


class Node:
    """The node of the session's control plane: kubelet, kube-scheduler and containerd, so pods
    run. Pods use images loaded with `load_image` and `imagePullPolicy: Never`; there is no
    kube-proxy and no cluster DNS (a pod that must reach the API server or a service on the host's
    loopback runs with `hostNetwork: true`)."""

    def __init__(self, controlplane: ControlPlane) -> None:
        self.controlplane = controlplane
        self.is_up = False
        self.images: list[str] = []  # loaded so far: loaded again if the node is restarted

    @property
    def name(self) -> str:
        return str(self.controlplane.env.get("FERRYMAN_NODE_NAME", "localhost"))

    @property
    def in_cluster_env(self) -> dict[str, str]:
        """What a `hostNetwork: true` pod needs for in-cluster config (there is no kube-proxy to
        route the `kubernetes` Service): the API server's loopback address and port."""
        address = self.controlplane.server.removeprefix("https://")
        host, port = address.rsplit(":", 1)
        return {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}

    def up(self) -> None:
        """`hack/controlplane add-node`; fails (never skips) with the reason it could not start."""
        if self.is_up:
            return
        # another session's node on this machine: wait for it, within the test's timeout
        state_dir = str(self.controlplane.state_dir)
        result = controlplane_command("add-node", "--state-dir", state_dir, "--node-wait", "200")
        if result.returncode != 0:
            pytest.fail(f"hack/controlplane add-node failed:\n{result.stderr}", pytrace=False)
        self.is_up = True
        state = json.loads((self.controlplane.state_dir / "state.json").read_text())
        self.controlplane.env.update(state["env"])
        for ref in self.images:  # a new node has an empty containerd
            exists = subprocess.run(["podman", "image", "exists", ref], check=False)
            if exists.returncode == 0:  # (its owner may have removed it since)
                self.load_image(ref)

    def down(self) -> None:
        """`hack/controlplane remove-node`: the control plane stays up."""
        result = controlplane_command(
            "remove-node", "--state-dir", str(self.controlplane.state_dir), timeout=180
        )
        self.is_up = False
        assert result.returncode == 0, result.stderr

    def load_image(self, ref: str) -> None:
        """`hack/controlplane load-image REF`: a podman image into the node's containerd."""
        result = controlplane_command(
            "load-image", "--state-dir", str(self.controlplane.state_dir), ref
        )
        assert result.returncode == 0, f"load-image {ref} failed:\n{result.stderr}"
        if ref not in self.images:
            self.images.append(ref)


@pytest.fixture(scope="session")
def node_control(controlplane: ControlPlane) -> Iterator[Node]:
    """The session's node, up or down (the host comparison test takes it down and up again)."""
    node = Node(controlplane)
    yield node
    if node.is_up:
        node.down()


@pytest.fixture(scope="session")
def node(node_control: Node) -> Node:
    """A running node in the session's control plane (added by the first test that asks)."""
    node_control.up()
    return node_control


# -- the operator under the chart's RBAC (test_operator*.py) ---------------------------------


@pytest.fixture(scope="module")
def release(
    controlplane: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """The CRD, and the chart's operator RBAC in a release namespace: (namespace, kubeconfig)."""
    operator_bench.install_crd(controlplane)
    namespace = f"ferryman-{uuid.uuid4().hex[:6]}"
    controlplane.kubectl("create", "namespace", namespace)
    home = tmp_path_factory.mktemp("operator")
    yield namespace, operator_bench.install_operator_rbac(controlplane, namespace, home)
    controlplane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.fixture
def world(
    controlplane: Any, release: tuple[str, Path], namespace: str, db_url: str, tmp_path: Path
) -> Iterator[Bench]:
    with operator_bench.bench(controlplane, *release, namespace, db_url, tmp_path) as bench:
        yield bench
