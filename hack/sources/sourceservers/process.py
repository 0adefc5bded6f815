"""Starting a server on a free loopback port, waiting until it answers, stopping it by its pid."""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from .cache import SourceServerError, tail

HOST = "127.0.0.1"
CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
"""The servers this process started, by pid (reaped by `alive`; started ones are never orphaned)."""
READY_SECONDS = 120.0
STOP_SECONDS = 15.0


@dataclasses.dataclass
class Running:
    """A server this process (or an earlier `up`) started: what a client needs to reach it."""

    name: str
    url: str
    pid: int
    state_dir: Path
    log: Path
    executable: str
    tokens: dict[str, str] = dataclasses.field(default_factory=dict)
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        described = dataclasses.asdict(self)
        described.update(state_dir=str(self.state_dir), log=str(self.log))
        return described

    def save(self) -> Path:
        path = self.state_dir / "server.json"
        path.write_text(json.dumps(self.describe(), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, state_dir: Path) -> Running:
        path = state_dir / "server.json"
        try:
            saved = json.loads(path.read_text())
        except FileNotFoundError:
            raise SourceServerError(
                f"no server.json in {state_dir}: nothing was started there"
            ) from None
        saved.update(state_dir=Path(saved["state_dir"]), log=Path(saved["log"]))
        return cls(**saved)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def spawn(command: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> int:
    """Start `command` in a session of its own (so no terminal signal reaches it); its pid."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    CHILDREN[proc.pid] = proc
    return proc.pid


def wait_ready(url: str, pid: int, log: Path, seconds: float = READY_SECONDS) -> None:
    """Poll `url` until it answers below 500; fail if the process exits or time runs out."""
    deadline = time.monotonic() + seconds
    while True:
        if not alive(pid):
            raise SourceServerError(f"the server (pid {pid}) exited while starting:\n{tail(log)}")
        try:
            if httpx.get(url, timeout=2.0).status_code < 500:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise SourceServerError(f"{url} did not answer within {seconds:.0f} s:\n{tail(log)}")
        time.sleep(0.1)  # polling a readiness probe, not synchronising on time


def alive(pid: int) -> bool:
    """True while `pid` runs (a child of ours that exited is reaped)."""
    if child := CHILDREN.get(pid):
        if child.poll() is None:
            return True
        del CHILDREN[pid]
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def is_ours(pid: int, executable: str) -> bool:
    """True if `pid` still runs `executable` (a pid reused by another program is left alone)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(executable.encode() in part for part in cmdline)


def release(pid: int) -> None:
    """Let `pid` outlive this process (`up` from the command line): no longer stopped at exit."""
    CHILDREN.pop(pid, None)


@atexit.register
def stop_children() -> None:
    """Stop every server this process started and did not stop (a crashed test leaves none)."""
    for pid, child in list(CHILDREN.items()):
        command = child.args
        stop(pid, str(command[0] if isinstance(command, list) else command))


def stop(pid: int, executable: str, seconds: float = STOP_SECONDS) -> None:
    """SIGTERM `pid`, then SIGKILL if it has not exited within `seconds`."""
    if not alive(pid) or not is_ours(pid, executable):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + seconds
        time.sleep(0.05)  # waiting for the process to exit
