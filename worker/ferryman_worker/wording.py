"""How run facts are said to people, wherever they are shown: ``ferryman run`` and ``ferryman
status`` (through ``console``) and the MigrationRun's status message (through ``contract``).

Pure formatting, a leaf: it imports nothing of ferryman, so every layer may use it."""

from __future__ import annotations

import datetime
from typing import Any


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def retrying_line(row: dict[str, Any], now: datetime.datetime) -> str:
    """Tasks waiting to try again (``runs.retrying``): how many, and why the latest failed."""
    wait = duration((row["run_at"] - now).total_seconds())
    return (
        f"  retrying {row['tasks']} task(s); the latest ({row['kind']} task {row['task_id']},"
        f" attempt {row['attempts']} of {row['max_attempts']}, next try in {wait}) failed:"
        f" {row['last_error']}"
    )
