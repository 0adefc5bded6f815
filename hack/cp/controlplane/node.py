"""Adding a real node to the local control plane: containerd (with Debian's runc and CNI
plugins), kube-scheduler and kubelet, so pods run on this machine.

Their settings are in nodeconfig.py. All of the node's state lives in <state-dir>/node/; what
kubelet changes elsewhere on the host is recorded before it starts (host.py) and undone by
teardown.remove_node.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import host
from .common import ControlPlaneError, format_seconds, log
from .gobuild import build, cp_cache, default_jobs
from .images import NAMESPACE, import_pause, load_image
from .nodeconfig import (
    BRIDGE,
    NODE_NAME,
    NODE_TOOLS,
    SUBNET,
    check_path_length,
    containerd_config,
    kubelet_config,
    node_dir,
    socket_path,
    write_cni_config,
)
from .pki import admin_context, issue, write_kubeconfig
from .processes import State, alive, free_port, http_ok, spawn, wait_until
from .teardown import remove_node

# ---- add ----------------------------------------------------------------------------------


def add_node(state: State, timeout: float, wait: float) -> None:
    """Start containerd, kube-scheduler and kubelet against the running control plane in
    `state`; wait until the Node is Ready and schedulable. On failure, undo what was done."""
    if "node" in state.info:
        raise ControlPlaneError(f"the node is already up in {state.directory}")
    if "server" not in state.info or not any(alive(p) for p in state.processes):
        raise ControlPlaneError(f"no control plane is up in {state.directory} (run `up`)")
    if not any(p["name"] == "kube-controller-manager" and alive(p) for p in state.processes):
        raise ControlPlaneError(
            "the node needs kube-controller-manager (its node-lifecycle controller lifts the "
            "not-ready taint of a new node): bring the control plane up without "
            "--no-controller-manager"
        )
    if os.geteuid() != 0:
        raise ControlPlaneError(
            "the node needs root: kubelet and containerd create cgroups, mounts and network "
            "namespaces (run as root, or leave out --node)"
        )
    check_path_length(state.directory)
    started = time.monotonic()
    cni_bin = host.ensure_packages()
    tools = build(default_jobs(), node=True)
    with machine_slot(wait):
        record_host(state)  # from here on, remove_node knows what to undo
        try:
            start(state, tools, cni_bin, time.monotonic() + timeout)
        except BaseException:
            remove_node(state)
            raise
    log(f"node {NODE_NAME} Ready in {format_seconds(time.monotonic() - started)}")


@contextlib.contextmanager
def machine_slot(wait: float) -> Iterator[None]:
    """One node per machine (kubelet's cgroups, sysctls and fixed paths are machine-wide): wait
    up to `wait` seconds while another kubelet runs or its cgroups remain."""
    cp_cache().mkdir(parents=True, exist_ok=True)
    with open(cp_cache() / ".node.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held only while checking and starting
        deadline, last = time.monotonic() + wait, 0.0
        while reason := machine_busy():
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"another node is on this machine: {reason}")
            if time.monotonic() - last > 30:
                log(f"waiting up to {wait:.0f} s for another node to go: {reason}")
                last = time.monotonic()
            time.sleep(2)
        yield


def machine_busy() -> str | None:
    for process in host.node_processes():  # running ones: an unreaped zombie does not count
        command, pid = process.split()
        if command == "kubelet":
            return f"kubelet runs (pid {pid})"
    if cgroups := host.kubepods_cgroups():
        return f"{cgroups[0]} exists (remove it when empty if no kubelet uses it)"
    if host.link_exists(BRIDGE):
        return f"the link {BRIDGE} exists (ip link delete {BRIDGE} if no node uses it)"
    return None


def record_host(state: State) -> None:
    if route := host.overlapping_route(SUBNET):
        raise ControlPlaneError(f"the pod subnet {SUBNET} overlaps the route {route}")
    state.info["node"] = {
        "name": NODE_NAME,
        "dir": str(node_dir(state)),
        "sysctls": host.read_sysctls(),
        "outside_paths": host.existing_outside_paths(),
    }
    state.save()


NODE_DIRS = (
    "containerd",
    "cni/net.d",
    "cni/ipam",
    "kubelet",
    "kubelet-pki",
    "pod-logs",
    "volume-plugins",
    "scheduler",
    "work",
)


def start(state: State, tools: dict[str, Path], cni_bin: Path, until: float) -> None:
    directory = node_dir(state)
    for sub in NODE_DIRS:
        (directory / sub).mkdir(parents=True, exist_ok=True)
    link_tools(state, tools)
    write_certificates(state)
    write_cni_config(directory)
    started = time.monotonic()
    start_containerd(state, cni_bin, until)
    import_pause(state.directory / "bin" / "ctr", str(socket_path(state)), directory / "work")
    runtime = time.monotonic()
    start_scheduler(state, until)
    start_kubelet(state, until)
    log(
        f"containerd and the pause image in {format_seconds(runtime - started)}, "
        f"kube-scheduler and kubelet (Ready) in {format_seconds(time.monotonic() - runtime)}"
    )
    publish_env(state)


def publish_env(state: State) -> None:
    """What `env` prints gains the node: ctr finds its containerd, scripts its name."""
    env = state.info.setdefault("env", {})
    env.update(
        CONTAINERD_ADDRESS=str(socket_path(state)),
        CONTAINERD_NAMESPACE=NAMESPACE,
        FERRYMAN_NODE_NAME=NODE_NAME,
    )
    for name in NODE_TOOLS:
        env[f"FERRYMAN_{name.upper().replace('-', '_')}"] = state.info["bin"][name]
    state.save()


def link_tools(state: State, tools: dict[str, Path]) -> None:
    bin_dir = state.directory / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in NODE_TOOLS:
        link = bin_dir / name
        link.unlink(missing_ok=True)
        link.symlink_to(tools[name])
        state.info["bin"][name] = str(tools[name])


def write_certificates(state: State) -> None:
    """The node's and the scheduler's client certificates, from the control plane's CA: the
    Node authorizer and NodeRestriction know kubelet by `system:node:<name>` in `system:nodes`."""
    pki, directory = state.directory / "pki", node_dir(state)
    issue(pki, "node", f"system:node:{NODE_NAME}", "system:nodes")
    issue(pki, "scheduler", "system:kube-scheduler")
    write_kubeconfig(directory / "kubelet.kubeconfig", state.info["server"], pki, "node")
    write_kubeconfig(directory / "scheduler.kubeconfig", state.info["server"], pki, "scheduler")


def start_containerd(state: State, cni_bin: Path, until: float) -> None:
    config = node_dir(state) / "containerd" / "config.toml"
    config.write_text(containerd_config(state, cni_bin))
    argv = [str(state.directory / "bin" / "containerd"), f"--config={config}"]
    path = f"{state.directory / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"  # for the shim
    proc = spawn(state, "containerd", argv, env={**os.environ, "PATH": path})
    ctr = [str(state.directory / "bin" / "ctr"), "--address", str(socket_path(state)), "version"]

    def ready() -> bool:
        if not socket_path(state).exists():
            return False
        return subprocess.run(ctr, capture_output=True, check=False).returncode == 0

    wait_until(state, proc, "containerd", ready, until)


def start_scheduler(state: State, until: float) -> None:
    kubeconfig, port = node_dir(state) / "scheduler.kubeconfig", free_port()
    argv = [
        str(state.directory / "bin" / "kube-scheduler"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={node_dir(state) / 'scheduler'}",
        "--leader-elect=false",
    ]
    proc = spawn(state, "kube-scheduler", argv)
    insecure = ssl.create_default_context()  # its serving certificate is self-signed
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    wait_until(
        state,
        proc,
        "kube-scheduler",
        lambda: http_ok(f"https://127.0.0.1:{port}/healthz", insecure),
        until,
    )


def start_kubelet(state: State, until: float) -> None:
    directory = node_dir(state)
    port, healthz_port = free_port(), free_port()
    config = directory / "kubelet.json"
    config.write_text(json.dumps(kubelet_config(state, port, healthz_port), indent=2))
    argv = [
        str(state.directory / "bin" / "kubelet"),
        f"--config={config}",
        f"--kubeconfig={directory / 'kubelet.kubeconfig'}",
        f"--root-dir={directory / 'kubelet'}",
        f"--cert-dir={directory / 'kubelet-pki'}",  # does not follow --root-dir
        f"--hostname-override={NODE_NAME}",
    ]
    proc = spawn(state, "kubelet", argv)
    wait_until(state, proc, "kubelet", lambda: node_ready(state), until)


def api_get(state: State, path: str) -> Any:
    context = admin_context(state.directory / "pki")
    with urllib.request.urlopen(f"{state.info['server']}{path}", timeout=5, context=context) as r:
        return json.loads(r.read())


def node_ready(state: State) -> bool:
    """Ready, and the not-ready taint lifted (by the node-lifecycle controller): schedulable."""
    try:
        node = api_get(state, f"/api/v1/nodes/{NODE_NAME}")
    except OSError:
        return False
    conditions = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
    taints = {t["key"] for t in node.get("spec", {}).get("taints", [])}
    return conditions.get("Ready") == "True" and not any(
        key.startswith("node.kubernetes.io/") for key in taints
    )


# ---- images -------------------------------------------------------------------------------


def load(state: State, ref: str) -> None:
    if "node" not in state.info:
        raise ControlPlaneError(f"no node is up in {state.directory} (run `up --node`)")
    ctr = state.directory / "bin" / "ctr"
    load_image(ctr, str(socket_path(state)), ref, node_dir(state) / "work")
