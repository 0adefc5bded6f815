"""What the node changes on the host outside its state directory, recorded before it starts and
undone by `down`: kernel settings, the `kubepods` cgroups, mounts, the CNI bridge, and the few
files kubelet and containerd always write at fixed paths. Nothing here touches what was there
before the node started."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from .common import ControlPlaneError, log

# Set by kubelet at every start (no setting skips it), and by the CNI bridge plugin (forwarding).
SYSCTLS = (
    "kernel.panic",
    "kernel.panic_on_oops",
    "vm.overcommit_memory",
    "net.ipv4.ip_forward",
    "net.ipv6.conf.all.forwarding",
)
# Written whatever the node's directories are: kubelet's device-plugin socket and container-log
# links, libcni's cache, the shims' sockets and runc's state; plus kubelet's defaults for
# directories the node redirects (kept here so a regression shows and is cleaned up).
OUTSIDE_PATHS = (
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/usr/libexec/kubernetes",
    "/var/lib/cni",
    "/run/containerd",
    "/var/lib/containerd",
    "/opt/containerd",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
KUBEPODS = "kubepods"
PACKAGES = {"runc": "runc", "CNI plugins": "containernetworking-plugins"}
CNI_BIN_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))


# ---- kernel settings ----------------------------------------------------------------------


def sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctls() -> dict[str, str]:
    values = {}
    for name in SYSCTLS:
        with contextlib.suppress(OSError):
            values[name] = sysctl_path(name).read_text().strip()
    return values


def restore_sysctls(before: dict[str, str]) -> list[str]:
    """Write back every recorded value that changed; return what was restored."""
    restored = []
    now = read_sysctls()
    for name, value in before.items():
        if now.get(name) != value:
            sysctl_path(name).write_text(value)
            restored.append(f"{name} {now.get(name)}->{value}")
    return restored


# ---- cgroups ------------------------------------------------------------------------------


def hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy (v1 controllers, name=systemd, the unified v2 one); the
    symlinks some systems add (cpu,cpuacct) are the same directories and are left out."""
    if not CGROUP_ROOT.is_dir():
        return []
    return sorted(p for p in CGROUP_ROOT.iterdir() if p.is_dir() and not p.is_symlink())


def kubepods_cgroups() -> list[str]:
    return [str(h / KUBEPODS) for h in hierarchies() if (h / KUBEPODS).is_dir()]


def remove_cgroups(paths: list[str], timeout: float = 20) -> list[str]:
    """Kill what is left in these cgroup trees (only node processes can be there), then rmdir
    them deepest first; retried while the kernel releases the cgroups."""
    removed = []
    deadline = time.monotonic() + timeout
    for top in map(Path, paths):
        while top.exists():
            for pid in procs_under(top):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            busy = False
            for directory, _, _ in sorted(os.walk(top), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(directory)
                except FileNotFoundError:
                    pass
                except OSError:
                    busy = True
            if busy and time.monotonic() > deadline:
                raise ControlPlaneError(f"cgroup {top} is still busy; rmdir it when empty")
            if busy:
                time.sleep(0.2)
        removed.append(str(top))
    return removed


def procs_under(top: Path) -> set[int]:
    pids: set[int] = set()
    for directory, _, files in os.walk(top):
        if "cgroup.procs" in files:
            with contextlib.suppress(OSError):
                text = (Path(directory) / "cgroup.procs").read_text()
                pids.update(int(p) for p in text.split())
    return pids


# ---- mounts and links ---------------------------------------------------------------------


def mount_points() -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        points.append(point.encode().decode("unicode_escape"))  # \040 is a space
    return points


def unmount_under(directory: Path) -> list[str]:
    """Unmount everything at or below `directory` (kubelet's bind mount of its root, volumes,
    network namespaces, container root filesystems), deepest first."""
    prefix = str(directory.resolve())
    inside = [p for p in mount_points() if p == prefix or p.startswith(prefix + "/")]
    done = []
    for point in sorted(set(inside), key=len, reverse=True):
        result = subprocess.run(["umount", point], capture_output=True, text=True, check=False)
        if result.returncode != 0:  # busy: detach it now, the kernel frees it when unused
            subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)
        done.append(point)
    return done


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def delete_link(name: str) -> None:
    result = subprocess.run(["ip", "link", "delete", name], capture_output=True, text=True)
    if result.returncode != 0 and link_exists(name):
        raise ControlPlaneError(f"ip link delete {name} failed: {result.stderr.strip()}")


def overlapping_route(subnet: str) -> str | None:
    """An existing IPv4 route that overlaps `subnet` (then the bridge would shadow it)."""
    result = subprocess.run(
        ["ip", "-j", "-4", "route", "show", "table", "all"],
        capture_output=True,
        text=True,
        check=False,
    )
    network = ipaddress.ip_network(subnet)
    for route in json.loads(result.stdout or "[]"):
        destination = route.get("dst", "")
        if destination in ("default", "") or route.get("type") in ("local", "broadcast"):
            continue
        with contextlib.suppress(ValueError):
            if ipaddress.ip_network(destination, strict=False).overlaps(network):
                return f"{destination} dev {route.get('dev', '?')}"
    return None


# ---- files outside the state directory ----------------------------------------------------


def existing_outside_paths() -> list[str]:
    return [p for p in OUTSIDE_PATHS if os.path.lexists(p)]


def remove_outside_paths(existed: list[str]) -> list[str]:
    removed = []
    for path in OUTSIDE_PATHS:
        if path in existed or not os.path.lexists(path):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
        removed.append(path)
    return removed


# ---- packages -----------------------------------------------------------------------------


def cni_bin_dir() -> Path | None:
    return next((d for d in CNI_BIN_DIRS if (d / "bridge").exists()), None)


def ensure_packages() -> Path:
    """runc and the CNI plugins, from Debian, installed only when missing; the CNI bin dir."""
    missing = []
    if shutil.which("runc") is None:
        missing.append(PACKAGES["runc"])
    if cni_bin_dir() is None:
        missing.append(PACKAGES["CNI plugins"])
    if missing:
        if shutil.which("apt-get") is None:
            raise ControlPlaneError(f"the node needs {', '.join(missing)}: install them")
        log(f"installing {' '.join(missing)} with apt-get")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=600", *missing]
        result = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ControlPlaneError(
                f"apt-get install {' '.join(missing)} failed:\n"
                f"{result.stdout[-2000:]}{result.stderr[-2000:]}"
            )
    found = cni_bin_dir()
    if found is None or shutil.which("runc") is None:
        raise ControlPlaneError("runc or the CNI plugins are still missing after apt-get")
    return found


def snapshot() -> dict[str, Any]:
    """What `down` must leave as it found: compared by tests before `up --node` and after
    `down` (also `hack/controlplane host-snapshot`)."""
    return {
        "links": sorted(links()),
        "iptables": iptables(),
        "cgroups": sorted(cgroup_dirs()),
        "mounts": sorted(mount_points()),
        "sysctls": read_sysctls(),
        "outside_paths": existing_outside_paths(),
        "processes": sorted(node_processes()),
    }


NODE_COMMANDS = ("kubelet", "kube-scheduler", "containerd", "containerd-shim")


def node_processes() -> list[str]:
    """`<command> <pid>` of every running kubelet, kube-scheduler, containerd and shim."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (proc / "stat").read_text()
                command, state = stat[stat.index("(") + 1 : stat.rindex(")")], stat.rsplit(")")[1]
                if command.startswith(NODE_COMMANDS) and state.split()[0] not in ("Z", "X"):
                    found.append(f"{command} {proc.name}")
    return found


def links() -> list[str]:
    """Each link as `name` or `name master <bridge>` (where a veth was plugged)."""
    result = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True)
    entries = json.loads(result.stdout or "[]")
    return [e["ifname"] + (f" master {e['master']}" if "master" in e else "") for e in entries]


def iptables() -> dict[str, list[str]]:
    """The rules of every table, IPv4 and IPv6, as iptables-save prints them (counters and the
    comment lines left out); a tool that is not installed is recorded as such."""
    rules = {}
    for tool in (
        "iptables-save",
        "ip6tables-save",
        "iptables-legacy-save",
        "ip6tables-legacy-save",
    ):
        path = shutil.which(tool)
        if path is None:
            rules[tool] = ["(not installed)"]
            continue
        result = subprocess.run([path], capture_output=True, text=True, check=False)
        lines = (result.stdout + result.stderr).splitlines()
        rules[tool] = [line.split(" [")[0] for line in lines if not line.startswith("#")]
    return rules


def cgroup_dirs(depth: int = 3) -> list[str]:
    found = []
    for hierarchy in hierarchies():
        base = len(hierarchy.parts)
        for directory, subdirs, _ in os.walk(hierarchy):
            if len(Path(directory).parts) - base >= depth:
                subdirs.clear()
            found.append(directory)
    return found
