"""``ferryman demo``: the capsule at work on this machine. Enqueues a batch of real jobs,
runs them on an in-process worker, and shows progress until the batch's callback has run."""

from __future__ import annotations

import sys
import time
from typing import Any

from ferryman_worker.db import connect, migrate
from ferryman_worker.queue import admin, batch, enqueue_many, job
from ferryman_worker.queue.runner import JobContext
from ferryman_worker.queue.worker import Worker
from ferryman_worker.settings import Settings


@job("demo.square", queue="default", pass_context=True)
def square(ctx: JobContext, n: int) -> None:
    """Write n² in the same transaction as the job's completion."""
    with ctx.completing() as conn:
        conn.execute("INSERT INTO ferryman_demo_results (n, square) VALUES (%s, %s)", (n, n * n))


@job("demo.done", queue="critical")
def done(batch: dict[str, Any]) -> None:
    print(f"\nbatch {batch['id']} finished: {batch['completed']} of {batch['total']} succeeded")


def run_queue_demo(url: str, settings: Settings, *, jobs: int) -> int:
    with connect.connect(url) as conn:
        migrate.migrate(conn)
        conn.execute("CREATE TABLE IF NOT EXISTS ferryman_demo_results (n integer, square bigint)")
        conn.execute("TRUNCATE ferryman_demo_results")
        worker = Worker(settings, url)
        worker.start()
        started = time.monotonic()
        try:
            with batch(on_finish=done.call(), conn=conn, demo=True) as b:
                enqueue_many((square.call(i) for i in range(jobs)), conn=conn)
            _show_progress(conn, b.id, jobs, started)
        finally:
            worker.stop(grace=10)
    return 0


def _show_progress(conn: connect.Connection, batch_id: int, total: int, started: float) -> None:
    while True:
        row = next(r for r in admin.batches(conn, limit=50) if r["id"] == batch_id)
        elapsed = time.monotonic() - started
        done_count = int(row["completed"]) + int(row["failed"])
        rate = done_count / elapsed if elapsed else 0.0
        bar = "#" * int(30 * done_count / max(total, 1))
        sys.stdout.write(f"\r[{bar:<30}] {done_count}/{total} jobs  {rate:,.0f} jobs/s")
        sys.stdout.flush()
        if row["finished_at"] is not None:
            time.sleep(0.3)  # let the callback print
            print(f"{done_count} jobs in {elapsed:.1f}s on lanes {_lanes(conn)!r}")
            return
        time.sleep(0.2)


def _lanes(conn: connect.Connection) -> str:
    row = conn.execute("SELECT lanes FROM ferryman_workers ORDER BY id DESC LIMIT 1").fetchone()
    return str(row["lanes"]) if row else "?"
