"""Job functions the queue tests run, in-process or in worker subprocesses
(``ferryman worker --import ferryman_testjobs`` with this folder on PYTHONPATH).

Each records its run in ``test_runs`` in the same transaction as its completion, so a count of
rows per job id is a count of committed runs.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ferryman_worker.db.connect import Connection
from ferryman_worker.queue import JobContext, Unretryable, enqueue, job

TABLES = """
CREATE TABLE IF NOT EXISTS test_runs (
    job_id bigint NOT NULL, n integer, pid integer NOT NULL, thread text,
    started_at timestamptz NOT NULL, finished_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS test_started (job_id bigint NOT NULL, pid integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS test_release (released boolean NOT NULL);
CREATE TABLE IF NOT EXISTS test_fixed (go boolean NOT NULL);
CREATE TABLE IF NOT EXISTS test_callbacks (kind text NOT NULL, batch jsonb NOT NULL,
    tag text, at timestamptz NOT NULL DEFAULT clock_timestamp());
"""


def create_tables(conn: Connection) -> None:
    conn.execute(TABLES)


def _record(ctx: JobContext, n: int | None, started: float) -> None:
    import threading

    with ctx.completing() as conn:
        conn.execute(
            "INSERT INTO test_runs (job_id, n, pid, thread, started_at)"
            " VALUES (%s, %s, %s, %s, to_timestamp(%s))",
            (ctx.job.id, n, os.getpid(), threading.current_thread().name, started),
        )


@job("test.record", queue="default", pass_context=True)
def record(ctx: JobContext, n: int | None = None) -> None:
    _record(ctx, n, time.time())


@job("test.sleep", queue="default", pass_context=True)
def sleep(ctx: JobContext, seconds: float, n: int | None = None) -> None:
    started = time.time()
    ctx.conn.execute(
        "INSERT INTO test_started (job_id, pid) VALUES (%s, %s)", (ctx.job.id, os.getpid())
    )
    time.sleep(seconds)
    _record(ctx, n, started)


@job("test.hold", queue="default", pass_context=True)
def hold(ctx: JobContext, n: int | None = None) -> None:
    """Record the start (committed), then hold the claim until a row is put in test_release."""
    started = time.time()
    ctx.conn.execute(
        "INSERT INTO test_started (job_id, pid) VALUES (%s, %s)", (ctx.job.id, os.getpid())
    )
    while ctx.conn.execute("SELECT 1 FROM test_release").fetchone() is None:
        time.sleep(0.05)
    _record(ctx, n, started)


@job("test.wait", queue="default", pass_context=True)
def wait(ctx: JobContext) -> None:
    """As ``hold``, but returns without ``completing()``: its success is written by the next
    claim on its connection (or by the release)."""
    ctx.conn.execute(
        "INSERT INTO test_started (job_id, pid) VALUES (%s, %s)", (ctx.job.id, os.getpid())
    )
    while ctx.conn.execute("SELECT 1 FROM test_release").fetchone() is None:
        time.sleep(0.05)


@job("test.locks", queue="default", pass_context=True)
def locks(ctx: JobContext) -> None:
    """Record, as n, how many advisory locks this job's connection holds while it runs: its
    own claim, and nothing a job before it on the same connection left behind."""
    row = ctx.conn.execute(
        "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND pid = pg_backend_pid()"
    ).fetchone()
    assert row is not None
    _record(ctx, int(row["n"]), time.time())


@job("test.commit_mode", queue="default", pass_context=True)
def commit_mode(ctx: JobContext) -> None:
    """Record, as n, whether this job's completing() transaction commits synchronously (1) or
    not (0): the claim's asynchronous commit must not reach the job's own writes."""
    with ctx.completing() as conn:
        row = conn.execute("SELECT current_setting('synchronous_commit') AS mode").fetchone()
        assert row is not None
        conn.execute(
            "INSERT INTO test_runs (job_id, n, pid, started_at) VALUES (%s, %s, %s, now())",
            (ctx.job.id, int(row["mode"] == "on"), os.getpid()),
        )


@job("test.always_fails", queue="default", max_attempts=5, pass_context=True)
def always_fails(ctx: JobContext) -> None:
    """Record each attempt's start (committed), then fail: the attempts show the backoff."""
    ctx.conn.execute(
        "INSERT INTO test_started (job_id, pid) VALUES (%s, %s)", (ctx.job.id, os.getpid())
    )
    raise RuntimeError(f"attempt {ctx.job.attempts + 1} fails")


@job("test.write_then_fail", queue="default", max_attempts=3, pass_context=True)
def write_then_fail(ctx: JobContext) -> None:
    """In completing(): write, then on the first attempt fail before the completion."""
    with ctx.completing() as conn:
        conn.execute(
            "INSERT INTO test_runs (job_id, n, pid, started_at) VALUES (%s, %s, %s, now())",
            (ctx.job.id, ctx.job.attempts, os.getpid()),
        )
        if ctx.job.attempts == 0:
            raise RuntimeError("failed between the writes and the completion")


@job("test.fixable", queue="default", max_attempts=1, pass_context=True)
def fixable(ctx: JobContext) -> None:
    """Fails until a row is in test_fixed; then runs until that row says go."""
    started = time.time()
    ctx.conn.execute(
        "INSERT INTO test_started (job_id, pid) VALUES (%s, %s)", (ctx.job.id, os.getpid())
    )
    if ctx.conn.execute("SELECT 1 FROM test_fixed").fetchone() is None:
        raise RuntimeError("not fixed yet")
    while ctx.conn.execute("SELECT 1 FROM test_fixed WHERE go").fetchone() is None:
        time.sleep(0.05)
    _record(ctx, None, started)


@job("test.flaky", queue="default", max_attempts=3, pass_context=True)
def flaky(ctx: JobContext, fail_times: int) -> None:
    if ctx.job.attempts < fail_times:
        raise RuntimeError(f"planned failure {ctx.job.attempts + 1} of {fail_times}")
    _record(ctx, ctx.job.attempts, time.time())


@job("test.hopeless", queue="default", max_attempts=5)
def hopeless() -> None:
    try:
        raise LookupError("the thing this job needs does not exist")
    except LookupError as exc:
        raise Unretryable(f"{exc}: create it, then `ferryman jobs retry`") from exc


@job("test.spawn", queue="default", pass_context=True)
def spawn(ctx: JobContext, children: int) -> None:
    """Enqueue children on the job's own connection: they join the job's batch, if any."""
    with ctx.completing() as conn:
        for i in range(children):
            enqueue(record, n=1000 + i, conn=conn)


@job("test.callback", queue="default")
def callback(kind: str, batch: dict[str, Any], tag: str | None = None) -> None:
    from psycopg.types.json import Jsonb

    from ferryman_worker.queue.producer import borrowed

    with borrowed(None) as conn:
        conn.execute(
            "INSERT INTO test_callbacks (kind, batch, tag) VALUES (%s, %s, %s)",
            (kind, Jsonb(batch), tag),
        )


@job("test.pressured", queue="default", pressure=True, pass_context=True)
def pressured(ctx: JobContext) -> None:
    _record(ctx, None, time.time())


@job("test.crash", queue="default", max_attempts=3, pass_context=True)
def crash(ctx: JobContext) -> None:
    """Record the start (committed), then kill this worker process: a poison job."""
    import signal

    ctx.conn.execute(
        "INSERT INTO test_started (job_id, pid) VALUES (%s, %s)", (ctx.job.id, os.getpid())
    )
    os.kill(os.getpid(), signal.SIGKILL)


@job("test.noop", queue="default")
def noop() -> None:
    """Nothing: measures the queue's own cost."""


@job("test.exits", queue="default", max_attempts=3, pass_context=True)
def exits(ctx: JobContext) -> None:
    """Record the start (committed), then raise SystemExit, which is no ``Exception``: a job
    that calls ``sys.exit()``."""
    import sys

    ctx.conn.execute(
        "INSERT INTO test_started (job_id, pid) VALUES (%s, %s)", (ctx.job.id, os.getpid())
    )
    sys.exit(3)


@job("test.exits_always", queue="default", max_attempts=1000, pass_context=True)
def exits_always(ctx: JobContext) -> None:
    """As ``exits``, with attempts enough to keep its lane thread failing for a test's length."""
    exits.func(ctx)


@job("test.touch", queue="default", pass_context=True)
def touch(ctx: JobContext) -> None:
    """A plain job (at least once): records each run's start, committed, and returns; its
    success is written by the next claim."""
    ctx.conn.execute(
        "INSERT INTO test_started (job_id, pid) VALUES (%s, %s)", (ctx.job.id, os.getpid())
    )
