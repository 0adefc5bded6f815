"""The migration task job: one queue job per task, carrying ``(task_id, run_id)`` only.

It claims its task with a fenced update or exits (a second job handed the same task, a task of
a phase not yet open, a finished task); then walks it (``walks``) and finishes it together with
the job's completion in one commit. Cancel and suspend are seen at the next window boundary; a
task whose job fails for good fails its run. An error that retrying cannot mend fails the task, its
job and its run at once: a source's (HTTP 4xx: a refused credential, an invalid request), or the
database's (``db.sqlstate.permanent``: a revoked privilege, a dropped table or column, the
barrier's seeding of the next phase refused). Any other error is tried again, with backoff, up to
the job's attempts.
"""

from __future__ import annotations

from typing import Any

from ferryman_worker import logs
from ferryman_worker.db import queries, sqlstate
from ferryman_worker.db.connect import Connection
from ferryman_worker.engine import schedule, verify, walks
from ferryman_worker.engine.runtime import RESOURCE, EngineRuntime
from ferryman_worker.engine.scope import Scope, Stop
from ferryman_worker.engine.source import SourceError
from ferryman_worker.errors import (
    CredentialRefused,
    ListingShort,
    MappingInvalid,
    MappingRefused,
    SeedingRefused,
)
from ferryman_worker.queue import JobContext, Unretryable, job

VERIFY_JOB = verify.verify_run
"""The verification job, registered beside the task job: a worker that walks a run's tasks
verifies its runs too (``engine.verification``)."""

MAX_CLAIMS = 50
"""A task claimed this many times without finishing fails its run: a backstop. A task that
crashes its worker ends sooner (the queue fails its job after ``max_attempts`` deaths, and the
reaper fails the task); only a task released again and again as stale could loop without it."""


@job(
    schedule.TASK_JOB,
    queue=schedule.TASK_OPTIONS.queue,
    max_attempts=schedule.TASK_OPTIONS.max_attempts,
    pass_context=True,
    pressure=True,
)
def run_task(ctx: JobContext, task_id: int, run_id: int) -> None:
    """Claim task ``task_id`` or exit; walk it; finish it with the job, in one commit."""
    logs.run_id.set(run_id)  # for the rest of this job (the worker gives each job its context)
    logs.task_id.set(task_id)
    task = ctx.conn.execute(
        queries.engine("claim_task"), {"task_id": task_id, "job_id": ctx.job.id}
    ).fetchone()
    if task is None:
        return  # another job has it, it is finished, or its phase is not open: nothing to do
    if task["attempts"] > MAX_CLAIMS:  # its walk keeps killing its worker, or keeps failing
        _fail(
            ctx.conn,
            task_id,
            run_id,
            ctx.job.id,
            f"claimed {MAX_CLAIMS} times without finishing (does it crash its worker?)",
        )
        return
    run = ctx.conn.execute(queries.engine("run_for_task"), {"run_id": run_id}).fetchone()
    assert run is not None
    try:
        _walk(ctx, run, task, ctx.resources.get(RESOURCE) or EngineRuntime())
    except Stop as stop:
        if stop.status is not None:
            with ctx.completing() as conn:
                conn.execute(
                    queries.engine("stop_task"),
                    {"task_id": task_id, "job_id": ctx.job.id, "status": stop.status},
                )
    except Exception as exc:
        hopeless = _hopeless(exc)
        if hopeless or ctx.job.is_last_attempt:
            _fail(ctx.conn, task_id, run_id, ctx.job.id, f"{type(exc).__name__}: {exc}")
        if hopeless:
            raise Unretryable(f"{exc} (retrying cannot help)") from exc
        raise


def _hopeless(exc: Exception) -> bool:
    """Whether trying the task again cannot mend ``exc``."""
    if isinstance(exc, SourceError):
        return not exc.retryable
    # MappingInvalid here is a stored snapshot its writer refuses
    hopeless = SeedingRefused | CredentialRefused | ListingShort | MappingRefused | MappingInvalid
    return isinstance(exc, hopeless) or sqlstate.permanent(exc)


def _walk(
    ctx: JobContext, run: dict[str, Any], task: dict[str, Any], runtime: EngineRuntime
) -> None:
    """The task's walk (a credential this worker lacks fails here, like the walk would). Its
    windows commit asynchronously unless the runtime says ``sync_windows``: each window's
    statement says so for its own transaction (``windows.Target.commit``)."""
    walks.walk(Scope.build(ctx, run, task, runtime))


def _fail(conn: Connection, task_id: int, run_id: int, job_id: int, error: str) -> None:
    with conn.transaction():
        conn.execute(
            queries.engine("fail_task"), {"task_id": task_id, "job_id": job_id, "error": error}
        )
        conn.execute(
            queries.engine("finish_run"),
            {
                "run_id": run_id,
                "state": "failed",
                "error": f"task {task_id} failed: {error}"[:2000],
            },
        )
