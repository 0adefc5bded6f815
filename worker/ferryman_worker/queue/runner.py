"""Running one claimed job and recording its outcome.

The outcome commits before the claim is released: success (with the job's final writes, when
it used ``JobContext.completing``), a retry with backoff, a failure kept for inspection, or a
deferral under pressure. A member that finished for good then asks its batch to finish.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import enum
import logging
import random
import traceback
from collections.abc import Iterator
from typing import Any

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.errors import JobAlreadyFinished, ProcessDied, Unretryable
from ferryman_worker.queue.claims import Finished, JobRecord
from ferryman_worker.queue.pressure import PressureGauge
from ferryman_worker.queue.producer import current_batch
from ferryman_worker.queue.registry import Registry

log = logging.getLogger("ferryman.queue")

MAX_ERROR = 2_000
MAX_TRACEBACK = 20_000


class Outcome(enum.Enum):
    SUCCEEDED = "succeeded"
    SUCCEEDING = "succeeding"
    """Returned, its success not yet written: the next claim (or the release) on the same
    connection writes it, in its own statement's transaction (one commit fewer per job)."""
    RETRYING = "retrying"
    FAILED = "failed"
    DEFERRED = "deferred"


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Exponential delays with jitter: ``base * 2^n`` capped at ``cap``, times 0.5 to 1.0."""

    base: float = 1.0
    cap: float = 600.0

    def delay(self, attempt: int) -> float:
        return min(self.cap, self.base * 2.0 ** max(attempt - 1, 0)) * random.uniform(0.5, 1.0)

    def after(self, attempt: int) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=self.delay(attempt))


@dataclasses.dataclass
class JobContext:
    """What a job registered with ``pass_context=True`` gets as its first argument."""

    job: JobRecord
    conn: Connection
    resources: dict[str, Any] = dataclasses.field(default_factory=dict)
    """What the worker process shares with its jobs (e.g. the engine's runtime)."""
    completed: bool = False

    @contextlib.contextmanager
    def completing(self) -> Iterator[Connection]:
        """A transaction on the claim's connection that also marks the job succeeded: the
        block's writes and the job's completion commit together, or neither does. This is the
        exactly-once way: without it a job is at least once (it runs again if its process or
        database dies between its work and its completion's commit)."""
        with self.conn.transaction():
            yield self.conn
            done = self.conn.execute(queries.get("succeed"), {"id": self.job.id}).fetchone()
            if done is None:
                raise JobAlreadyFinished(
                    f"job {self.job.id} was already finished elsewhere; its writes are rolled back"
                )
        self.completed = True


@dataclasses.dataclass
class Runner:
    """Runs claimed jobs for one worker process."""

    registry: Registry
    backoff: Backoff
    gauge: PressureGauge
    resources: dict[str, Any] = dataclasses.field(default_factory=dict)

    def run(self, conn: Connection, job: JobRecord, *, defer_success: bool = False) -> Outcome:
        """Run ``job`` on ``conn`` and commit its outcome. The claim is still held on return.

        ``defer_success``: a job that returns without having completed itself is SUCCEEDING,
        its success left to the caller's next statement on ``conn``.
        """
        if job.died and job.attempts + job.died >= job.max_attempts:
            return self._failed_attempt(conn, job, ProcessDied(job.died))
        try:
            target = self.registry.get(job.name)
        except Exception as exc:
            return self._failed_attempt(conn, job, exc)
        if target.pressure and self.gauge.over(conn):
            conn.execute(
                queries.get("defer"),
                {"id": job.id, "run_at": self.backoff.after(job.deferrals + 1)},
            )
            return Outcome.DEFERRED
        ctx = JobContext(job, conn, self.resources)
        token = current_batch.set(job.batch_id)
        try:
            args = (ctx, *job.args) if target.pass_context else tuple(job.args)
            target.func(*args, **job.kwargs)
        except Exception as exc:
            _end_transaction(conn)
            if ctx.completed:
                log.warning("job %s (%s) raised after completing: %r", job.id, job.name, exc)
                return Outcome.SUCCEEDED
            return self._failed_attempt(conn, job, exc)
        finally:
            current_batch.reset(token)
        if ctx.completed:
            return Outcome.SUCCEEDED
        if defer_success:
            return Outcome.SUCCEEDING
        conn.execute(queries.get("succeed"), {"id": job.id})
        return Outcome.SUCCEEDED

    def _failed_attempt(self, conn: Connection, job: JobRecord, exc: Exception) -> Outcome:
        error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR]
        trace = "".join(traceback.format_exception(exc))[-MAX_TRACEBACK:]
        if job.is_last_attempt or isinstance(exc, Unretryable):
            log.error(
                "job %s (%s) failed for good after %d attempt(s): %s",
                job.id,
                job.name,
                job.attempts + 1,
                error,
            )
            conn.execute(queries.get("fail"), {"id": job.id, "error": error, "traceback": trace})
            return Outcome.FAILED
        retry_at = self.backoff.after(job.attempts + 1)
        log.info(
            "job %s (%s) attempt %d failed, retrying at %s: %s",
            job.id,
            job.name,
            job.attempts + 1,
            retry_at.isoformat(),
            error,
        )
        conn.execute(
            queries.get("retry_later"),
            {"id": job.id, "run_at": retry_at, "error": error, "traceback": trace},
        )
        return Outcome.RETRYING


def finished(job: JobRecord, outcome: Outcome) -> Finished:
    """The job's claim, to release; a member that succeeded or failed for good left its batch;
    a SUCCEEDING job's success is written with the release."""
    done = (Outcome.SUCCEEDED, Outcome.SUCCEEDING, Outcome.FAILED)
    left = job.batch_id is not None and outcome in done
    return Finished(job, left_batch=left, succeed=outcome is Outcome.SUCCEEDING)


def _end_transaction(conn: Connection) -> None:
    """Roll back what a failed job left open, so its outcome is written on a clean session."""
    if conn.info.transaction_status.name != "IDLE":
        conn.rollback()
