"""Claims: a session advisory lock on the job id, taken on the connection the lane thread
holds for the job's whole run, and given back after the job's outcome commits.

If the process dies, its connections die and PostgreSQL drops the locks: the job is claimable
again at once, with no sweep and no timeout.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection


@dataclasses.dataclass(frozen=True)
class JobRecord:
    """A claimed job's row, as it was when the claim was verified."""

    id: int
    queue: str
    name: str
    args: list[Any]
    kwargs: dict[str, Any]
    priority: int
    attempts: int
    max_attempts: int
    deferrals: int
    concurrency_key: str | None
    batch_id: int | None
    run_at: datetime.datetime
    created_at: datetime.datetime

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> JobRecord:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in row.items() if key in fields})

    @property
    def is_last_attempt(self) -> bool:
        return self.attempts + 1 >= self.max_attempts


def claim(conn: Connection, queue: str, window: int) -> JobRecord | None:
    """Claim the next due job of ``queue`` that no one holds, or None."""
    row = conn.execute(queries.get("claim"), {"queue": queue, "window": window}).fetchone()
    return JobRecord.from_row(row) if row else None


def release(conn: Connection, job: JobRecord) -> None:
    """Drop the claim's locks. Call only after the job's outcome committed (or rolled back)."""
    conn.execute(queries.get("release"), {"id": job.id, "concurrency_key": job.concurrency_key})
