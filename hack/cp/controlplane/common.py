"""What every part shares: the log line, the error type, small text helpers."""

from __future__ import annotations

import collections
import sys
from pathlib import Path


def log(message: str) -> None:
    print(f"[controlplane] {message}", file=sys.stderr, flush=True)


class ControlPlaneError(Exception):
    """A step failed; the message says which and why."""


def tail(path: Path, lines: int = 40) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(collections.deque(f, maxlen=lines))
    except FileNotFoundError:
        return ""


def format_seconds(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


REPO = Path(__file__).resolve().parents[3]
