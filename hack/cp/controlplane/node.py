"""A real node for the local control plane: containerd (with Debian's runc and CNI plugins),
kube-scheduler and kubelet, so pods run on this machine.

Every setting below that differs from a default was required on a cgroup-v1 VM without systemd
and without CAP_SYS_RESOURCE; docs/development.md lists each with the error it fixes. All of the
node's state lives in <state-dir>/node/; what kubelet changes elsewhere on the host is recorded
before it starts and undone by `remove_node` (see host.py).
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
from .images import NAMESPACE, PAUSE_IMAGE, import_pause, load_image
from .pki import admin_context, issue, write_kubeconfig
from .processes import State, alive, free_port, http_ok, spawn, stop, wait_until

NODE_NAME = "localhost"  # resolves to 127.0.0.1 everywhere, where kubelet listens (see docs)
BRIDGE = "ferryman0"
SUBNET = "10.217.0.0/24"
NODE_PROCESSES = ("containerd", "kube-scheduler", "kubelet")
NODE_TOOLS = ("kubelet", "kube-scheduler", "containerd", "containerd-shim-runc-v2", "ctr")


def node_dir(state: State) -> Path:
    return state.directory / "node"


def socket_path(state: State) -> Path:
    return node_dir(state) / "containerd.sock"


# Unix socket paths are limited (containerd refuses more than 104 bytes); the longest of the
# node's are containerd's ttrpc socket and kubelet's pod-resources socket.
LONGEST_SOCKET = "node/kubelet/pod-resources/kubelet.sock"
MAX_STATE_DIR = 104 - 1 - len(LONGEST_SOCKET)


def check_path_length(directory: Path) -> None:
    length = len(str(directory))
    if length > MAX_STATE_DIR:
        raise ControlPlaneError(
            f"the state directory {directory} is {length} characters long; the node's "
            f"unix sockets need it at most {MAX_STATE_DIR}: use a shorter --state-dir"
        )


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


def write_cni_config(directory: Path) -> None:
    """A bridge of our own name and subnet; no NAT (ipMasq false: no iptables rule, and pods on
    this network reach only this machine); IP allocations kept in the node's directory."""
    conflist = {
        "cniVersion": "1.0.0",
        "name": "ferryman",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": SUBNET}]],
                    "dataDir": str(directory / "cni" / "ipam"),
                },
            }
        ],
    }
    (directory / "cni" / "net.d" / "10-ferryman.conflist").write_text(json.dumps(conflist))


def containerd_config(state: State, cni_bin: Path) -> str:
    base = node_dir(state) / "containerd"
    sock = socket_path(state)
    return f"""\
version = 3
root = "{base / "root"}"
state = "{base / "state"}"
imports = []

[grpc]
  address = "{sock}"

[ttrpc]
  address = "{sock}.ttrpc"

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{PAUSE_IMAGE}"

  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["{cni_bin}"]
      conf_dir = "{node_dir(state) / "cni" / "net.d"}"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      SystemdCgroup = false

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

  [plugins.'io.containerd.nri.v1.nri']
    disable = true

  [plugins.'io.containerd.internal.v1.opt']
    path = "{base / "opt"}"

  [plugins.'io.containerd.image-verifier.v1.bindir']
    bin_dir = "{base / "opt" / "image-verifier"}"
"""


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


def kubelet_config(state: State, port: int, healthz_port: int) -> dict[str, Any]:
    directory = node_dir(state)
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,  # kubelet >= 1.35 refuses cgroup v1 hosts without it
        "cgroupDriver": "cgroupfs",  # no systemd
        "failSwapOn": False,  # CI machines have swap
        "containerRuntimeEndpoint": f"unix://{socket_path(state)}",
        "address": "127.0.0.1",  # the kubelet API stays off the network
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(state.directory / "pki" / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "makeIPTablesUtilChains": False,  # else KUBE-* chains and a DROP rule in the host's tables
        "podLogsDir": str(directory / "pod-logs"),
        "volumePluginDir": str(directory / "volume-plugins"),
        # local images cannot be pulled again: never garbage-collect them
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # a developer's disk is often fuller than kubelet's defaults allow (pods would be evicted)
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
    }


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


# ---- remove -------------------------------------------------------------------------------


def remove_node(state: State, delete_object: bool = False) -> list[str]:
    """Stop the node's processes (by pid), remove every container, mount, link, cgroup and file
    it made, and restore the kernel settings kubelet changed. Safe to run again: the state
    forgets the node only once all of that is done."""
    info = state.info.get("node")
    if info is None:
        return []
    done = stop_node(state)
    done += undo_host(Path(info["dir"]), info)
    if delete_object:
        done += delete_node_object(state)
    forget_node(state)
    return done


def stop_node(state: State) -> list[str]:
    """kubelet and kube-scheduler first (nothing restarts a container then), every container,
    containerd, and any shim that outlived it."""
    done = []
    processes = {p["name"]: p for p in state.processes if p["name"] in NODE_PROCESSES}
    for name in ("kubelet", "kube-scheduler"):
        if name in processes and alive(processes[name]):
            stop(processes[name])
            done.append(f"stopped {name} (pid {processes[name]['pid']})")
    if "containerd" in processes and alive(processes["containerd"]):
        done += remove_containers(state)
        stop(processes["containerd"])
        done.append(f"stopped containerd (pid {processes['containerd']['pid']})")
    return done + [f"killed shim {pid}" for pid in kill_shims(state)]


def undo_host(directory: Path, info: dict[str, Any]) -> list[str]:
    done = [f"removed cgroup {c}" for c in host.remove_cgroups(host.kubepods_cgroups())]
    done += [f"unmounted {m}" for m in host.unmount_under(directory)]
    if host.link_exists(BRIDGE):
        host.delete_link(BRIDGE)
        done.append(f"deleted link {BRIDGE}")
    done += [f"restored {s}" for s in host.restore_sysctls(info["sysctls"])]
    done += [f"removed {p}" for p in host.remove_outside_paths(info["outside_paths"])]
    if directory.exists():
        subprocess.run(["rm", "-rf", "--one-file-system", str(directory)], check=False)
    return done


def forget_node(state: State) -> None:
    state.processes = [p for p in state.processes if p["name"] not in NODE_PROCESSES]
    del state.info["node"]
    env = state.info.get("env", {})
    for key in ("CONTAINERD_ADDRESS", "CONTAINERD_NAMESPACE", "FERRYMAN_NODE_NAME"):
        env.pop(key, None)
    for name in NODE_TOOLS:
        state.info["bin"].pop(name, None)
        (state.directory / "bin" / name).unlink(missing_ok=True)
        env.pop(f"FERRYMAN_{name.upper().replace('-', '_')}", None)
    if state.file.exists():
        state.save()


def remove_containers(state: State) -> list[str]:
    """Kill and delete every container in the node's containerd (pods' and sandboxes')."""
    ctr = [str(state.directory / "bin" / "ctr"), "--address", str(socket_path(state))]
    ctr += ["--namespace", NAMESPACE]
    listed = subprocess.run([*ctr, "containers", "ls", "-q"], capture_output=True, text=True)
    ids = listed.stdout.split()
    for container in ids:
        subprocess.run([*ctr, "tasks", "delete", "--force", container], capture_output=True)
        subprocess.run([*ctr, "containers", "delete", container], capture_output=True)
    return [f"removed {len(ids)} containers"] if ids else []


def kill_shims(state: State) -> list[int]:
    """Shims outlive containerd; ours are the ones started with our containerd's address."""
    address = str(socket_path(state))
    killed = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            shim = os.path.basename(argv[0]).startswith(b"containerd-shim-runc-v2")
            if shim and address.encode() in argv:
                os.kill(int(proc.name), 9)
                killed.append(int(proc.name))
    return killed


def delete_node_object(state: State) -> list[str]:
    """Delete the Node, so the pod garbage collector removes its pods from the API."""
    request = urllib.request.Request(
        f"{state.info['server']}/api/v1/nodes/{NODE_NAME}", method="DELETE"
    )
    context = admin_context(state.directory / "pki")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context):
            return [f"deleted Node {NODE_NAME}"]
    except OSError:
        return []


# ---- images -------------------------------------------------------------------------------


def load(state: State, ref: str) -> None:
    if "node" not in state.info:
        raise ControlPlaneError(f"no node is up in {state.directory} (run `up --node`)")
    ctr = state.directory / "bin" / "ctr"
    load_image(ctr, str(socket_path(state)), ref, node_dir(state) / "work")
