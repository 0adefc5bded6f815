"""The node of `hack/controlplane up --node`: real pods, started by kubelet through containerd and
runc, from images loaded out of podman; and a host left as it was found once the node is down."""

from __future__ import annotations

import contextlib
import functools
import http.server
import io
import json
import shutil
import subprocess
import tarfile
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.node

BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static: one static binary, every applet
APPLETS = ("sh", "sleep", "cat", "echo", "ls", "hostname", "ip", "true", "wget")
SUBNET_PREFIX = "10.217.0."  # hack/cp/controlplane/node.py SUBNET


def podman_image(ref: str, files: dict[str, bytes]) -> None:
    """A podman image holding static busybox (and `files`), built with `podman import` from a
    tar: nothing is pulled."""
    podman = shutil.which("podman")
    if podman is None or not BUSYBOX.exists():
        pytest.fail(
            "the node tests need podman and busybox-static (apt-get install podman busybox-static)",
            pytrace=False,
        )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(BUSYBOX, "bin/busybox")
        for applet in APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(content), 0o644
            tar.addfile(info, io.BytesIO(content))
    imported = subprocess.run(
        [podman, "import", "--change", 'CMD ["/bin/sh"]', "-", ref],
        input=buffer.getvalue(),
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr.decode()


def remove_podman_image(ref: str) -> None:
    subprocess.run(["podman", "rmi", "--force", ref], capture_output=True, check=False)


@pytest.fixture(scope="module")
def image(node: Any) -> Iterator[str]:
    """A busybox image in the node's containerd, loaded with `hack/controlplane load-image`."""
    ref = f"localhost/ferryman-node-test:{uuid.uuid4().hex[:8]}"
    podman_image(ref, {})
    try:
        node.load_image(ref)
        yield ref
    finally:
        remove_podman_image(ref)


def loaded_image(load: Callable[[str], None], name: str, files: dict[str, bytes]) -> str:
    """A fresh busybox image (with ``files``) loaded by ``load`` into a node's containerd; its
    podman copy is removed at once (only the node's copy is used)."""
    ref = f"localhost/ferryman-node-{name}:{uuid.uuid4().hex[:8]}"
    podman_image(ref, files)
    try:
        load(ref)
    finally:
        remove_podman_image(ref)
    return ref


def pod_spec(
    image: str,
    command: list[str],
    *,
    host_network: bool = False,
    restart: str | None = "Never",
    **container: Any,
) -> dict[str, Any]:
    """A pod spec of one container ``main`` running ``command`` from a loaded image (never
    pulled); ``restart`` None leaves the restart policy at Always."""
    main = {"name": "main", "image": image, "imagePullPolicy": "Never", "command": command}
    spec: dict[str, Any] = {"containers": [{**main, **container}]}
    if host_network:
        spec["hostNetwork"] = True
    if restart:
        spec["restartPolicy"] = restart
    return spec


def apply(
    controlplane: Any, namespace: str, kind: str, name: str, spec: dict[str, Any], api: str = "v1"
) -> None:
    manifest = {"apiVersion": api, "kind": kind, "metadata": {"name": name}, "spec": spec}
    controlplane.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def pod_phase(controlplane: Any, namespace: str, name: str) -> str:
    pod = controlplane.kubectl_json("get", "pod", "-n", namespace, name)
    return str(pod.get("status", {}).get("phase", ""))


def run_pod(
    controlplane: Any, namespace: str, wait_for: Any, name: str, spec: dict[str, Any], phase: str
) -> None:
    """Apply pod ``name`` and wait (90 s at most) for it to reach ``phase``."""
    apply(controlplane, namespace, "Pod", name, spec)
    wait_for(lambda: pod_phase(controlplane, namespace, name) == phase, timeout=90)


def test_a_host_network_deployment_runs(
    controlplane: Any, node: Any, image: str, namespace: str, wait_for: Any
):
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": pod_spec(image, ["sleep", "3600"], host_network=True, restart=None),
    }
    deployment = {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template}
    apply(controlplane, namespace, "Deployment", "web", deployment, api="apps/v1")
    controlplane.kubectl(
        "rollout", "status", "-n", namespace, "deployment/web", "--timeout=90s", timeout=100
    )
    pods = controlplane.kubectl_json("get", "pods", "-n", namespace, "-l", "app=web")["items"]
    assert [p["status"]["phase"] for p in pods] == ["Running", "Running"]
    assert {p["spec"]["nodeName"] for p in pods} == {node.name}
    host_ip = pods[0]["status"]["hostIP"]
    assert {p["status"]["podIP"] for p in pods} == {host_ip}  # the host's network


@pytest.fixture
def loopback_server() -> Iterator[tuple[int, str]]:
    """An HTTP server on the host's 127.0.0.1 (like the demo CRM and PostgreSQL in tests) that
    answers every GET with a fresh marker."""
    marker = uuid.uuid4().hex

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(marker)))
            self.end_headers()
            self.wfile.write(marker.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], marker
    finally:
        server.shutdown()
        server.server_close()


def test_a_host_network_pod_reaches_a_server_on_the_hosts_loopback(
    controlplane: Any, node: Any, image: str, namespace: str, wait_for: Any, loopback_server: Any
):
    port, marker = loopback_server
    script = f"wget -qO- http://127.0.0.1:{port}/; echo; echo $KUBERNETES_SERVICE_PORT"
    env = [{"name": k, "value": v} for k, v in node.in_cluster_env.items()]
    spec = pod_spec(image, ["sh", "-c", script], host_network=True, env=env)
    run_pod(controlplane, namespace, wait_for, "client", spec, "Succeeded")
    logs = controlplane.kubectl("logs", "-n", namespace, "client").stdout.split()
    assert logs == [marker, node.in_cluster_env["KUBERNETES_SERVICE_PORT"]]


def test_a_pod_network_pod_gets_its_memory_limit_and_answers_exec(
    controlplane: Any, node: Any, image: str, namespace: str, wait_for: Any
):
    resources = {"requests": {"memory": "32Mi"}, "limits": {"memory": "64Mi"}}
    spec = pod_spec(image, ["sleep", "3600"], restart=None, resources=resources)
    run_pod(controlplane, namespace, wait_for, "limited", spec, "Running")
    pod = controlplane.kubectl_json("get", "pod", "-n", namespace, "limited")
    assert pod["status"]["podIP"].startswith(SUBNET_PREFIX)  # the node's CNI bridge
    limit = controlplane.kubectl(
        "exec",
        "-n",
        namespace,
        "limited",
        "--",
        "cat",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ).stdout
    assert int(limit) == 64 * 1024 * 1024
    addresses = controlplane.kubectl(
        "exec", "-n", namespace, "limited", "--", "ip", "-4", "addr"
    ).stdout
    assert pod["status"]["podIP"] in addresses
    # only the bridge's subnet is routed: no default route, so no traffic leaves the machine
    routes = controlplane.kubectl("exec", "-n", namespace, "limited", "--", "ip", "route").stdout
    assert routes.split() == [
        f"{SUBNET_PREFIX}0/24",
        "dev",
        "eth0",
        "scope",
        "link",
        "src",
        pod["status"]["podIP"],
    ]


def test_a_job_runs_to_complete_and_its_logs_are_read(
    controlplane: Any, node: Any, image: str, namespace: str, wait_for: Any
):
    template = {"spec": pod_spec(image, ["sh", "-c", "echo job-ran-on-$(hostname)"])}
    job = {"backoffLimit": 0, "template": template}
    apply(controlplane, namespace, "Job", "once", job, api="batch/v1")
    controlplane.kubectl(
        "wait",
        "-n",
        namespace,
        "job/once",
        "--for=condition=Complete",
        "--timeout=90s",
        timeout=100,
    )
    logs = controlplane.kubectl("logs", "-n", namespace, "job/once").stdout
    assert logs.startswith("job-ran-on-once-")  # the pod's hostname: it ran in its own UTS ns


def test_a_loaded_image_runs_with_its_own_files(
    controlplane: Any, node: Any, namespace: str, wait_for: Any
):
    marker = uuid.uuid4().hex
    ref = loaded_image(node.load_image, "load", {"marker.txt": marker.encode()})
    spec = pod_spec(ref, ["cat", "/marker.txt"])
    run_pod(controlplane, namespace, wait_for, "loaded", spec, "Succeeded")
    assert controlplane.kubectl("logs", "-n", namespace, "loaded").stdout == marker


def test_env_points_ctr_at_the_nodes_containerd(controlplane: Any, node: Any, image: str):
    shell = controlplane.env_shell("ctr images ls -q\necho node=$FERRYMAN_NODE_NAME\n")
    assert shell.returncode == 0, shell.stderr
    lines = shell.stdout.splitlines()
    assert {"localhost/pause:3.10", image} <= set(lines)  # the sandbox image, built here
    assert lines[-1] == f"node={node.name}"


def test_load_image_names_a_missing_image(controlplane_cli: Any, node: Any):
    result = controlplane_cli(
        "load-image", "--state-dir", str(node.controlplane.state_dir), "localhost/no-such:1"
    )
    assert result.returncode == 1
    assert "podman save localhost/no-such:1 failed" in result.stderr


@functools.cache
def podman_stores() -> tuple[str, ...]:
    """podman's image store and its run directory, wherever its storage.conf puts them (podman
    mounts the store's ``overlay`` directory while it uses it, and drops the mount after)."""
    found = subprocess.run(
        ["podman", "info", "--format", "{{.Store.GraphRoot}}\n{{.Store.RunRoot}}"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    return tuple(line for line in found.stdout.split() if line.startswith("/"))


# The machine's own supervisor and podman (other work on this machine) change these meanwhile;
# nothing of the node is among them.
FOREIGN = (
    "process_api",
    "libpod",
    "podman",
    "netavark",
    "NETAVARK",
    "/var/lib/containers/storage",
    "/run/containers/storage",
)


def host_snapshot(controlplane_cli: Any) -> dict[str, Any]:
    result = controlplane_cli("host-snapshot")
    assert result.returncode == 0, result.stderr
    snapshot: dict[str, Any] = json.loads(result.stdout)
    return snapshot


def differences(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    foreign = FOREIGN + podman_stores()
    found: dict[str, Any] = {}
    for key in ("links", "cgroups", "mounts", "outside_paths", "processes"):
        added = sorted(set(after[key]) - set(before[key]))
        removed = sorted(set(before[key]) - set(after[key]))
        changed = [x for x in added + removed if not any(f in x for f in foreign)]
        if changed:
            found[key] = {"added": added, "removed": removed}
    for tool, rules in before["iptables"].items():
        changed = sorted(set(rules) ^ set(after["iptables"][tool]))
        changed = [rule for rule in changed if not any(f in rule for f in foreign)]
        if changed:
            found[tool] = changed
    if before["sysctls"] != after["sysctls"]:
        found["sysctls"] = {"before": before["sysctls"], "after": after["sysctls"]}
    return found


@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
def test_podmans_own_mount_of_its_store_is_not_the_nodes() -> None:
    snapshot = {"links": [], "cgroups": [], "outside_paths": [], "processes": [], "iptables": {}}
    mounted = {**snapshot, "mounts": [f"{podman_stores()[0]}/overlay"], "sysctls": {}}
    assert differences(mounted, {**snapshot, "mounts": [], "sysctls": {}}) == {}


def run_two_pods(controlplane: Any, namespace: str, wait_for: Any, load: Any) -> None:
    """A host-network and a pod-network pod from a freshly loaded image, both Running: the node
    has made its bridge, veth, network namespace, cgroups and mounts."""
    ref = loaded_image(load, "host", {})
    for name, host_network in (("on-host", True), ("on-bridge", False)):
        spec = pod_spec(ref, ["sleep", "3600"], host_network=host_network, restart=None)
        apply(controlplane, namespace, "Pod", name, spec)
    for name in ("on-host", "on-bridge"):
        wait_for(lambda n=name: pod_phase(controlplane, namespace, n) == "Running", timeout=90)


@contextlib.contextmanager
def node_taken_down(node_control: Any) -> Iterator[None]:
    """The session's node down for the block (the host as the node found it), and up again
    after it if it was up."""
    was_up = node_control.is_up
    node_control.down()
    try:
        yield
    finally:
        if was_up:
            node_control.up()


NODE_CHANGES = {"links", "cgroups", "mounts", "sysctls", "outside_paths", "processes"}


def test_down_leaves_the_host_as_up_found_it(
    controlplane: Any, node_control: Any, controlplane_cli: Any, namespace: str, wait_for: Any
):
    with node_taken_down(node_control):
        before = host_snapshot(controlplane_cli)
        node_control.up()
        try:
            run_two_pods(controlplane, namespace, wait_for, node_control.load_image)
            during = host_snapshot(controlplane_cli)
        finally:
            node_control.down()
        after = host_snapshot(controlplane_cli)
        # the node did change the host while it ran (so the comparison sees such changes) ...
        assert differences(before, during).keys() >= NODE_CHANGES
        # ... and remove-node undid every one
        assert differences(before, after) == {}


def test_the_watchdog_removes_the_node_of_a_killed_owner(
    node_control: Any,
    start_controlplane: Any,
    controlplane_cli: Any,
    tmp_path_factory: pytest.TempPathFactory,
    wait_for: Any,
):
    with node_taken_down(node_control):
        before = host_snapshot(controlplane_cli)
        owner = subprocess.Popen(["sleep", "600"])
        state_dir = tmp_path_factory.mktemp("owner") / "state"  # short, for the node's sockets
        try:
            with start_controlplane(state_dir, "--node", "--watch-pid", str(owner.pid)) as plane:
                plane.kubectl("create", "namespace", "pods")

                def load(ref: str) -> None:
                    loaded = controlplane_cli("load-image", "--state-dir", str(state_dir), ref)
                    assert loaded.returncode == 0, loaded.stderr

                run_two_pods(plane, "pods", wait_for, load)
                assert differences(before, host_snapshot(controlplane_cli)).keys() >= NODE_CHANGES
                owner.kill()
                owner.wait()
                wait_for(lambda: not state_dir.exists(), timeout=90)
            assert differences(before, host_snapshot(controlplane_cli)) == {}
        finally:
            owner.kill()
            owner.wait()


def test_one_node_per_machine_and_a_second_is_refused_with_the_reason(
    node: Any,
    start_controlplane: Any,
    controlplane_cli: Any,
    tmp_path_factory: pytest.TempPathFactory,
):
    state_dir = tmp_path_factory.mktemp("second") / "state"
    with start_controlplane(state_dir) as second:
        result = controlplane_cli("add-node", "--state-dir", str(state_dir), "--node-wait", "0")
        assert result.returncode == 1
        assert "another node is on this machine: kubelet runs (pid " in result.stderr
        assert second.kubectl("get", "nodes", "-o", "name").stdout == ""
    assert node.controlplane.kubectl("get", "node", node.name, "-o", "name").stdout.strip()


def test_a_state_dir_too_long_for_the_sockets_is_refused_before_anything_starts(
    controlplane: Any, controlplane_cli: Any, tmp_path: Path
):
    state_dir = tmp_path / ("x" * 60) / "state"
    result = controlplane_cli("up", "--node", "--state-dir", str(state_dir))
    assert result.returncode == 1
    assert "use a shorter --state-dir" in result.stderr
    assert not state_dir.exists()


def test_images_loaded_before_a_node_restart_run_after_it(
    controlplane: Any, node_control: Any, image: str, namespace: str, wait_for: Any
):
    node_control.down()
    node_control.up()  # a fresh containerd: the fixture loads its images again
    run_pod(
        controlplane,
        namespace,
        wait_for,
        "again",
        pod_spec(image, ["echo", "still here"]),
        "Succeeded",
    )
    assert controlplane.kubectl("logs", "-n", namespace, "again").stdout == "still here\n"
