"""Inspecting and repairing the queue: counts, failed jobs, retry/discard, batches, the
stalled-batch sweep and pruning. Used by ``ferryman jobs`` and ``ferryman reap``."""

from __future__ import annotations

import dataclasses
from typing import Any

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection

PRUNE_CHUNK = 10_000


def queue_counts(conn: Connection) -> list[dict[str, Any]]:
    """Per queue: ready, running, scheduled, failed and succeeded job counts."""
    return conn.execute(queries.get("queue_counts")).fetchall()


def failed_jobs(conn: Connection, limit: int = 100) -> list[dict[str, Any]]:
    return conn.execute(queries.get("failed_jobs"), {"limit": limit}).fetchall()


def retry_failed(conn: Connection, ids: list[int] | None) -> int:
    """Put failed jobs (these ids, or all when None) back on their queue; returns how many."""
    params = {"all": ids is None, "ids": ids or []}
    row = conn.execute(queries.get("retry_failed"), params).fetchone()
    return int(row["retried"]) if row else 0


def discard_failed(conn: Connection, ids: list[int] | None) -> int:
    """Mark failed jobs discarded (pruned later); returns how many."""
    params = {"all": ids is None, "ids": ids or []}
    return len(conn.execute(queries.get("discard_failed"), params).fetchall())


def batches(conn: Connection, limit: int = 20) -> list[dict[str, Any]]:
    """Recent batches, newest first, with live or final counts."""
    return conn.execute(queries.get("batches"), {"limit": limit}).fetchall()


@dataclasses.dataclass(frozen=True)
class SweepReport:
    sealed: int
    finished: int


def sweep_stalled_batches(conn: Connection, stalled_for: float) -> SweepReport:
    """Repair batches that after-commit work left behind: unsealed batches whose process died,
    and batches with no live member that no one finished (their last member's process died
    before its check, or their members were finished or deleted by hand)."""
    sealed = conn.execute(
        queries.get("seal_stalled_batches"), {"stalled_for": stalled_for}
    ).fetchall()
    finished = conn.execute(queries.get("finish_stalled_batches")).fetchall()
    return SweepReport(len(sealed), sum(1 for row in finished if row["finished"]))


def prune(conn: Connection, older_than: float) -> dict[str, int]:
    """Delete finished jobs, batches and stale worker rows older than ``older_than`` seconds."""
    jobs = 0
    while True:
        deleted = conn.execute(
            queries.get("prune_jobs"), {"older_than": older_than, "limit": PRUNE_CHUNK}
        ).rowcount
        jobs += deleted
        if deleted < PRUNE_CHUNK:
            break
    batches_deleted = conn.execute(
        queries.get("prune_batches"), {"older_than": older_than}
    ).rowcount
    workers = conn.execute(queries.get("prune_workers"), {"older_than": older_than}).rowcount
    return {"jobs": jobs, "batches": batches_deleted, "workers": workers}
