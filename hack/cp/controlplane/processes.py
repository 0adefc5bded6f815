"""Daemons started in their own session, recorded by pid (and start time) so `down` stops
exactly those."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import os
import shlex
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import ControlPlaneError, log, tail


@dataclasses.dataclass
class State:
    """What `up` started, saved in <state-dir>/state.json after every step (so `down` can undo
    a half-finished `up`)."""

    directory: Path
    processes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def file(self) -> Path:
        return self.directory / "state.json"

    def save(self) -> None:
        record = {"processes": self.processes, **self.info}
        temporary = self.file.with_suffix(".tmp")
        temporary.write_text(json.dumps(record, indent=2) + "\n")
        os.replace(temporary, self.file)

    @classmethod
    def load(cls, directory: Path) -> State | None:
        try:
            record = json.loads((directory / "state.json").read_text())
        except FileNotFoundError:
            return None
        processes = record.pop("processes")
        return cls(directory, processes, record)


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (guards against a recycled process id)."""
    if not Path("/proc/self/stat").exists():  # not Linux: existence only, no recycling guard
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "unknown"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # a zombie has finished
        return None
    return fields[19]


def alive(process: dict[str, Any]) -> bool:
    started = start_time(int(process["pid"]))
    return started is not None and started == process["started"]


def spawn(
    state: State, name: str, argv: list[str], env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a daemon in its own session, output to logs/<name>.log; record it."""
    logs = state.directory / "logs"
    logs.mkdir(exist_ok=True)
    with open(logs / f"{name}.log", "ab") as out:
        out.write(f"$ {shlex.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    state.processes.append(
        {"name": name, "pid": proc.pid, "started": start_time(proc.pid), "argv": argv}
    )
    state.save()
    return proc


def stop(process: dict[str, Any], grace: float = 15.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; only if it is still the process we started."""
    pid = int(process["pid"])
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if not alive(process):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while alive(process) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap it if it is our own child
            time.sleep(0.05)
    if alive(process):
        raise ControlPlaneError(f"{process['name']} (pid {pid}) survived SIGKILL")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class StartFailed(ControlPlaneError):
    def __init__(self, name: str, logfile: Path, reason: str) -> None:
        super().__init__(f"{name} {reason}; last lines of {logfile}:\n{tail(logfile, 25)}")
        self.port_taken = "address already in use" in tail(logfile, 25)


def wait_until(
    state: State, proc: subprocess.Popen[bytes], name: str, ready: Callable[[], bool], until: float
) -> None:
    """Poll `ready` until it is true; fail if the process exits or the deadline passes."""
    logfile = state.directory / "logs" / f"{name}.log"
    while not ready():
        if proc.poll() is not None:
            raise StartFailed(name, logfile, f"exited with status {proc.returncode}")
        if time.monotonic() > until:
            raise StartFailed(name, logfile, "did not become ready in time")
        time.sleep(0.25)


def start_retrying(
    state: State,
    name: str,
    start: Callable[[], tuple[subprocess.Popen[bytes], Callable[[], bool]]],
    until: float,
) -> None:
    """Start a daemon on fresh free ports; try again if another process took a port meanwhile."""
    for attempt in range(3):
        proc, ready = start()
        try:
            wait_until(state, proc, name, ready, until)
            return
        except StartFailed as failure:
            stop(state.processes.pop())
            state.save()
            if not failure.port_taken or attempt == 2:
                raise
            log(f"{name}: a port was taken meanwhile; trying other ports")


def http_ok(url: str, context: ssl.SSLContext | None = None, expect: str = "ok") -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            body = response.read().decode()
            return response.status == 200 and expect in body
    except (OSError, http.client.HTTPException):  # URLError is an OSError
        return False
