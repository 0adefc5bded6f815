"""Claims: a session advisory lock on the job id, taken on the connection the lane thread
holds for the job's whole run, and given back after the job's outcome commits. The claim also
marks the row (``claimed_by``, the backend's pid) so that it leaves the claim's index: a claim's
scan never walks past running jobs, however many run.

The lock is what proves a claim alive. If the process dies, its connections die and PostgreSQL
drops the locks; the other workers see it gone within a second and free its claims
(``ferryman_free_dead_claims``: a marked row whose lock no one holds), and the job is claimable
again, with no timeout.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.queue import batches


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
    claims: int
    """Claims taken, this one included (counted by the claim itself)."""
    concurrency_key: str | None
    batch_id: int | None
    run_at: datetime.datetime
    created_at: datetime.datetime
    waited: float = 0.0
    """Seconds from when it was due (the later of ``run_at`` and ``created_at``) to the claim, on
    the database's clock."""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> JobRecord:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in row.items() if key in fields})

    @property
    def died(self) -> int:
        """Earlier claims that ended in neither an outcome nor a deferral: the process running
        the job died (or lost its database) mid-attempt. Each counts as an attempt."""
        return max(0, self.claims - 1 - self.attempts - self.deferrals)

    @property
    def is_last_attempt(self) -> bool:
        return self.attempts + self.died + 1 >= self.max_attempts


@dataclasses.dataclass(frozen=True)
class Finished:
    """A job whose outcome has committed, still holding its claim.

    ``left_batch``: it was a batch member and finished for good, so its batch may finish now.
    ``succeed``: it returned, and its success is written with its release (the next claim),
    its batch membership ended in the same statement.
    """

    job: JobRecord
    left_batch: bool
    succeed: bool = False


def claim(
    conn: Connection,
    queue: str,
    window: int,
    previous: Finished | None = None,
    check_batch: int | None = None,
) -> JobRecord | None:
    """Claim the next due job of ``queue`` that no one holds, or None.

    ``previous``, the job this connection just finished, is released in the same round trip
    (one statement, one commit), its success written first if it is still to be. A batch may
    finish only once its last member's end has committed: if ``previous`` ended in an earlier
    statement (a failure, or ``completing()``), its batch is checked now; if its success is
    written by this statement, the caller checks its batch with the next one (``check_batch``).
    """
    batch = (
        previous.job.batch_id if previous and previous.left_batch and not previous.succeed else None
    )
    if check_batch is not None and batch not in (None, check_batch):
        # two batches to check: one before the claim (so that its failure loses no claim),
        # one in it
        batches.try_finish(conn, check_batch)
    elif check_batch is not None:
        batch = check_batch
    params = {
        "queue": queue,
        "window": window,
        "release": previous.job.id if previous else None,
        "release_key": previous.job.concurrency_key if previous else None,
        "batch": batch,
        "succeed": previous.job.id if previous and previous.succeed else None,
    }
    row = conn.execute(queries.get("claim"), params).fetchone()
    return JobRecord.from_row(row) if row else None


def batch_to_check(finished: Finished | None, claimed: JobRecord | None) -> int | None:
    """The batch to check in the statement after the one that wrote ``finished``'s success
    and claimed ``claimed``.

    None when ``claimed`` is a member of the same batch: while it is live the batch cannot
    finish, and its own end (whoever writes it, after a retry or a crash) is checked in turn.
    So a thread that runs a batch's members one after another checks the batch once, after the
    last of them, not once per member.
    """
    if finished is None or not (finished.succeed and finished.left_batch):
        return None
    if claimed is not None and claimed.batch_id == finished.job.batch_id:
        return None
    return finished.job.batch_id


def unclaim(conn: Connection, job: JobRecord) -> None:
    """Give up the claim of a job that ended without an outcome: it is ready again at once (the
    claim counts as a died attempt), and one thread of its queue is woken."""
    conn.execute(queries.get("unclaim"), {"id": job.id, "concurrency_key": job.concurrency_key})


def release(conn: Connection, finished: Finished, check_batch: int | None = None) -> None:
    """Drop a finished job's claim without claiming another (and let its batch, and
    ``check_batch``, finish)."""
    if check_batch is not None and check_batch != finished.job.batch_id:
        batches.try_finish(conn, check_batch)
    job = finished.job
    if finished.succeed:
        conn.execute(queries.get("succeed"), {"id": job.id})
    conn.execute(queries.get("release"), {"id": job.id, "concurrency_key": job.concurrency_key})
    if finished.left_batch and job.batch_id is not None:
        batches.try_finish(conn, job.batch_id)
