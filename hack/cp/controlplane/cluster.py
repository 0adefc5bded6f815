"""The control plane itself: etcd, kube-apiserver, kube-controller-manager; up and down."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import REPO, ControlPlaneError, log
from .gobuild import build, default_jobs
from .host import unmount_under
from .node import add_node
from .nodeconfig import NODE_TOOLS, check_path_length
from .pki import admin_context, make_pki, write_kubeconfig
from .processes import State, alive, free_port, http_ok, spawn, start_retrying, start_time, stop
from .teardown import remove_node
from .versions import VERSIONS

SERVICE_CIDR = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# kube-controller-manager controllers started by `up` (docs/development.md explains each).
CONTROLLERS = (
    "serviceaccount-token-controller",
    "serviceaccount-controller",
    "root-ca-certificate-publisher-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "clusterrole-aggregation-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "job-controller",
    "cronjob-controller",
    "ttl-after-finished-controller",
    "resourcequota-controller",
    "disruption-controller",
    "endpointslice-controller",
    # for a node (`up --node`): lifts the not-ready taint the API server puts on a new Node, and
    # marks it NotReady when kubelet stops; deletes the pods of a deleted node
    "node-lifecycle-controller",
    "pod-garbage-collector-controller",
)


def start_etcd(state: State, tools: dict[str, Path]) -> tuple[subprocess.Popen[bytes], Any]:
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    argv = [
        str(tools["etcd"]),
        "--name=ferryman",
        f"--data-dir={state.directory / 'etcd'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=ferryman={peer}",
        "--unsafe-no-fsync",  # throw-away data: durability buys nothing, fsync costs seconds
        "--log-level=warn",
    ]
    proc = spawn(state, "etcd", argv)
    state.info["etcd"] = client
    return proc, lambda: http_ok(f"{client}/health", expect='"health":"true"')


def start_apiserver(state: State, tools: dict[str, Path]) -> tuple[subprocess.Popen[bytes], Any]:
    port = free_port()
    proc = spawn(state, "kube-apiserver", apiserver_argv(state, tools["kube-apiserver"], port))
    server = f"https://127.0.0.1:{port}"
    state.info["server"] = server
    return proc, apiserver_ready(state, server)


def apiserver_argv(state: State, binary: Path, port: int) -> list[str]:
    """kube-apiserver on `port`, against the control plane's etcd, with its certificates."""
    pki = state.directory / "pki"
    return [
        str(binary),
        f"--etcd-servers={state.info['etcd']}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        "--endpoint-reconciler-type=none",  # it refuses loopback; no pod would use it anyway
        f"--secure-port={port}",
        f"--cert-dir={pki}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--authorization-mode=Node,RBAC",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        "--profiling=false",
    ]


def apiserver_ready(state: State, server: str) -> Callable[[], bool]:
    """Whether the API server at `server` answers /readyz `ok` (to the admin)."""
    context = admin_context(state.directory / "pki")
    return lambda: http_ok(f"{server}/readyz", context)


def start_controller_manager(
    state: State, tools: dict[str, Path]
) -> tuple[subprocess.Popen[bytes], Any]:
    pki, port = state.directory / "pki", free_port()
    kubeconfig = state.directory / "controller-manager.kubeconfig"
    write_kubeconfig(kubeconfig, state.info["server"], pki, "controller-manager")
    argv = [
        str(tools["kube-controller-manager"]),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={state.directory / 'controller-manager'}",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        "--use-service-account-credentials=true",
        "--leader-elect=false",
        f"--controllers={','.join(CONTROLLERS)}",
    ]
    proc = spawn(state, "kube-controller-manager", argv)
    insecure = ssl.create_default_context()  # its serving certificate is self-signed
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    account = f"{state.info['server']}/api/v1/namespaces/default/serviceaccounts/default"
    context = admin_context(pki)

    def ready() -> bool:  # healthy, and the service-account controller has done its first work
        healthy = http_ok(f"https://127.0.0.1:{port}/healthz", insecure)
        return healthy and http_ok(account, context, expect='"name":"default"')

    return proc, ready


def start_watchdog(state: State, pid: int) -> None:
    """A small process that runs `down` when process `pid` (say, a test session) has gone."""
    script = str(Path(__file__).resolve().parents[1] / "main.py")
    argv = [sys.executable, script, "_watch", f"--state-dir={state.directory}", f"--pid={pid}"]
    spawn(state, "watchdog", argv)


def watch(directory: Path, pid: int) -> None:
    watched = {"name": "watched", "pid": pid, "started": start_time(pid)}
    while (directory / "state.json").exists():
        if not alive(watched):
            log(f"process {pid} has gone: taking the control plane down")
            down(directory)
            return
        time.sleep(1)


# --------------------------------------------------------------------------------------------
# up, down, env
# --------------------------------------------------------------------------------------------


def up(
    directory: Path,
    controller_manager: bool,
    watch_pid: int | None,
    timeout: float,
    node: bool = False,
    node_wait: float = 0,
) -> State:
    if node and not controller_manager:
        raise ControlPlaneError(
            "--node needs kube-controller-manager (leave out --no-controller-manager)"
        )
    if node:
        check_path_length(directory)
    tools = build(default_jobs(), node)
    prepare(directory)
    state = State(directory, info={"versions": dict(VERSIONS), "bin": {}})
    link_tools(state, tools)
    make_pki(directory / "pki")
    until = time.monotonic() + timeout
    try:
        start_retrying(state, "etcd", lambda: start_etcd(state, tools), until)
        start_retrying(state, "kube-apiserver", lambda: start_apiserver(state, tools), until)
        kubeconfig = directory / "kubeconfig"
        write_kubeconfig(kubeconfig, state.info["server"], directory / "pki", "admin")
        state.info["kubeconfig"] = str(kubeconfig)
        if controller_manager:
            start = lambda: start_controller_manager(state, tools)  # noqa: E731
            start_retrying(state, "kube-controller-manager", start, until)
        if watch_pid:
            start_watchdog(state, watch_pid)
        state.info["env"] = environment(state)
        state.save()
        if node:
            add_node(state, timeout, node_wait)
    except BaseException:
        down(directory, keep_logs=True)
        raise
    return state


def prepare(directory: Path) -> None:
    """An empty state directory; a stale one (its processes gone) is cleared first."""
    existing = State.load(directory)
    if existing and any(alive(p) for p in existing.processes):
        raise ControlPlaneError(f"a control plane is already up in {directory} (run `down`)")
    remove_state(directory)
    directory.mkdir(parents=True)
    (directory / MARKER).touch()
    (directory / "logs").mkdir()


MARKER = ".ferryman-controlplane"  # only a directory holding this file is ever deleted


def remove_state(directory: Path) -> None:
    if not directory.exists():
        return
    if not (directory / MARKER).exists() and any(directory.iterdir()):
        raise ControlPlaneError(f"{directory} is not empty and not a control plane's state")
    unmount_under(directory)  # a node's leftovers, if its teardown was cut short
    shutil.rmtree(directory)


def link_tools(state: State, tools: dict[str, Path]) -> None:
    """<state>/bin holds version-free names (kubectl, helm, …) for PATH."""
    bin_dir = state.directory / "bin"
    bin_dir.mkdir()
    for name, path in tools.items():
        if name in NODE_TOOLS:
            continue  # linked by add_node
        (bin_dir / name).symlink_to(path)
        state.info["bin"][name] = str(path)


def environment(state: State) -> dict[str, str]:
    env = {
        "KUBECONFIG": state.info["kubeconfig"],
        "FERRYMAN_CONTROLPLANE_DIR": str(state.directory),
        "FERRYMAN_CONTROLPLANE_BIN": str(state.directory / "bin"),
    }
    for name, path in state.info["bin"].items():
        env[f"FERRYMAN_{name.upper().replace('-', '_')}"] = path
    return env


def down(directory: Path, keep_logs: bool = False) -> list[str]:
    """Remove the node (if any), stop the recorded processes, newest first (the watchdog first),
    then remove the state."""
    state = State.load(directory)
    if state is None:
        if not keep_logs:
            remove_state(directory)
        return []
    try:
        stopped = remove_node(state)
    except ControlPlaneError as error:  # stop the rest anyway; keep the state to try again
        stop_all(state)
        raise ControlPlaneError(f"{error}\nthe processes are stopped; run `down` again") from error
    stopped += stop_all(state)
    if keep_logs:
        (directory / "state.json").unlink(missing_ok=True)
    else:
        remove_state(directory)
    return stopped


def stop_all(state: State) -> list[str]:
    stopped = []
    for process in reversed(state.processes):
        if int(process["pid"]) != os.getpid() and alive(process):
            stop(process)
            stopped.append(f"stopped {process['name']} (pid {process['pid']})")
    return stopped


def default_state_dir() -> Path:
    override = os.environ.get("FERRYMAN_CONTROLPLANE_DIR")
    return Path(override).resolve() if override else REPO / ".state" / "controlplane"
