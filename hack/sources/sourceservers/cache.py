"""Where the servers are built and installed: outside the repository, once per pinned version."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path


class SourceServerError(RuntimeError):
    """A server could not be built, started, seeded or stopped; the message says why."""


def cache_dir() -> Path:
    """$FERRYMAN_CACHE_DIR/sources, else $XDG_CACHE_HOME/ferryman/sources (~/.cache by default)."""
    if override := os.environ.get("FERRYMAN_CACHE_DIR"):
        return Path(override).expanduser().resolve() / "sources"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().resolve() / "ferryman" / "sources"


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """One build of `name` at a time per cache (two test sessions may start together)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f".{name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another process is building {name}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def log(message: str) -> None:
    print(f"sources: {message}", file=sys.stderr, flush=True)


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"
