"""More API servers on a control plane that is up: another kube-apiserver against the same etcd,
on a free loopback port of its own, with the same certificates and service-account keys (the
same objects, tokens and RBAC rules) plus flags of its own, e.g. `--max-requests-inflight=1`
for a test that needs a server answering 429. The control plane's own API server keeps its
flags, so nothing else that uses the control plane notices; `down` stops it with the rest."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from .cluster import apiserver_argv, apiserver_ready
from .common import ControlPlaneError
from .processes import State, alive, free_port, spawn, start_retrying, stop

NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")


def process_name(name: str) -> str:
    return f"kube-apiserver-{name}"


def add_apiserver(state: State, name: str, flags: Sequence[str], timeout: float) -> str:
    """Start the API server `name` with `flags` (after the control plane's own: a flag given
    again takes the later value); wait until it is ready; return its URL."""
    if not NAME.match(name):
        raise ControlPlaneError(
            f"API server name {name!r}: use lower-case letters, digits and '-' (up to 31)"
        )
    servers: dict[str, str] = state.info.setdefault("apiservers", {})
    if name in servers:
        raise ControlPlaneError(f"an API server {name!r} is already up (remove-apiserver {name})")
    for flag in flags:
        if not flag.startswith("--"):
            raise ControlPlaneError(f"{flag!r} is not a kube-apiserver flag (--name=value)")
    binary = Path(state.info["bin"]["kube-apiserver"])

    def start() -> tuple[subprocess.Popen[bytes], Callable[[], bool]]:
        port = free_port()
        argv = [*apiserver_argv(state, binary, port), *flags]
        proc = spawn(state, process_name(name), argv)
        servers[name] = f"https://127.0.0.1:{port}"
        return proc, apiserver_ready(state, servers[name])

    try:
        start_retrying(state, process_name(name), start, time.monotonic() + timeout)
    except BaseException:
        servers.pop(name, None)
        state.save()
        raise
    state.save()
    return servers[name]


def remove_apiserver(state: State, name: str) -> list[str]:
    """Stop the API server `name` (by pid) and forget it; [] if there was none."""
    server = state.info.get("apiservers", {}).pop(name, None)
    done = []
    for process in [p for p in state.processes if p["name"] == process_name(name)]:
        if alive(process):
            stop(process)
            done.append(f"stopped {process['name']} (pid {process['pid']}, {server})")
        state.processes.remove(process)
    state.save()
    return done
