"""Jobs the queue benchmark's worker processes run (``ferryman worker --import
ferryman_benchjobs`` with this folder on PYTHONPATH; not the bench's folder, whose queue.py would
shadow the standard library's queue module)."""

from __future__ import annotations

import time

from ferryman_worker.queue import job


@job("bench.sleep", queue="default")
def sleep(seconds: float) -> None:
    """A slow job that holds its claim (and its connection) without touching the database."""
    time.sleep(seconds)


@job("bench.noop", queue="default")
def noop() -> None:
    """Nothing: the queue's own cost (the overhead benchmarks' job)."""


@job("bench.done", queue="default")
def done(batch: dict[str, object]) -> None:
    """The benchmark batch's callback."""
