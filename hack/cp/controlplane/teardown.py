"""Taking the node away: its processes stopped by pid, every container, mount, link, cgroup and
file it made removed, and the kernel settings kubelet changed written back (see host.py)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from . import host
from .images import NAMESPACE
from .nodeconfig import BRIDGE, NODE_NAME, NODE_PROCESSES, NODE_TOOLS, socket_path
from .pki import admin_context
from .processes import State, alive, stop


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
