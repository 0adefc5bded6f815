"""``ferryman reap``: the repair sweeps, run every five minutes by a CronJob.

Each sweep repeats what a finishing task or job would have done; it decides nothing the rows
don't already say, and is safe to run concurrently with workers and with another reaper:

- fail running tasks whose job failed for good without failing them (the queue gave up on a job
  whose worker kept dying), and their runs;
- release running tasks whose claim is dead (their job is over) or stale (its lock is held but
  no checkpoint for 30 minutes): the cursor is intact, the retry resumes. A task whose job is
  still ready is left alone: the job waits out its backoff, or the queue runs it again, and it
  takes its own task back with its attempt count;
- requeue the queued tasks of runs whose heartbeat stopped (30 minutes without a window) whose
  jobs are gone;
- fail runs with a task that failed for good, whose finisher died before failing the run;
- advance phases that closed without a winner (and finish runs whose last phase closed); a run
  whose next phase the database refuses to seed for good (``SeedingRefused``) fails, naming it;
- refill runs whose tasks in flight are below their limit, oldest run first;
- the stalled-batch sweep and the pruning of old job rows.
"""

from __future__ import annotations

import dataclasses

from ferryman_worker import providers
from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.engine import phases, runs, schedule
from ferryman_worker.errors import SeedingRefused
from ferryman_worker.queue import admin
from ferryman_worker.settings import Settings


@dataclasses.dataclass(frozen=True)
class EngineSweeps:
    failed_tasks: int
    released: int
    stalled_runs: int
    requeued: int
    failed_runs: int
    advanced: int
    refilled_runs: int
    queued: int


def sweep_engine(conn: Connection, stale_after: float) -> EngineSweeps:
    """The engine's sweeps, in the order in which each makes work for the next."""
    failed_tasks = conn.execute(queries.engine("fail_tasks_of_failed_jobs")).fetchall()
    released = conn.execute(
        queries.engine("release_dead_claims"), {"stale_after": stale_after}
    ).fetchall()
    stalled = conn.execute(
        queries.engine("release_stalled_runs"),
        {"stale_after": stale_after, "job_name": schedule.TASK_JOB},
    ).fetchone()
    failed = conn.execute(queries.engine("fail_runs_with_failed_tasks")).fetchall()
    advanced, refused = 0, 0
    for run in conn.execute(queries.engine("runs_with_closed_phase")).fetchall():
        try:
            advanced += _advance(conn, int(run["id"]))
        except SeedingRefused as exc:
            params = {"run_id": run["id"], "state": "failed", "error": str(exc)[:2000]}
            refused += conn.execute(queries.engine("finish_run"), params).rowcount
    refilled, queued = 0, 0
    for run in conn.execute(queries.engine("runs_below_width")).fetchall():
        with conn.transaction():
            ids = schedule.top_up(conn, runs.lock(conn, int(run["id"])))
        refilled += bool(ids)
        queued += len(ids)
    return EngineSweeps(
        len(failed_tasks),
        len(released),
        int(stalled["runs"]) if stalled else 0,
        int(stalled["tasks"]) if stalled else 0,
        len(failed) + len(failed_tasks) + refused,
        advanced,
        refilled,
        queued,
    )


def _advance(conn: Connection, run_id: int) -> bool:
    """The barrier of a run whose open phase closed without a winner; whether it moved."""
    with conn.transaction():
        locked = runs.lock(conn, run_id)
        before = (locked["phase"], locked["state"])
        phases.close_if_done(conn, locked, providers.of_run(locked))
        after = runs.lock(conn, run_id)
        return (after["phase"], after["state"]) != before


def reap(conn: Connection, settings: Settings) -> list[str]:
    """Run every sweep once; returns one line per sweep saying what it did."""
    engine = sweep_engine(conn, settings.stale_claim_after)
    batches = admin.sweep_stalled_batches(conn, settings.stalled_batch_after)
    pruned = admin.prune(conn, settings.retention_hours * 3600)
    return [
        f"tasks whose job failed for good: {engine.failed_tasks} task(s) failed",
        f"dead or stale task claims: {engine.released} task(s) released",
        f"runs whose heartbeat stopped: {engine.stalled_runs} run(s) stalled, "
        f"{engine.requeued} task(s) that had lost their job requeued",
        f"failed tasks: {engine.failed_runs} run(s) marked failed",
        f"phases closed without a winner: {engine.advanced} run(s) advanced",
        f"runs below their in-flight limit: {engine.refilled_runs} run(s) refilled, "
        f"{engine.queued} task(s) queued",
        f"stalled batches: {batches.sealed} sealed, {batches.finished} finished",
        f"prune: {pruned['jobs']} job(s), {pruned['batches']} batch(es), "
        f"{pruned['workers']} worker row(s) older than {settings.retention_hours:g}h deleted",
    ]
