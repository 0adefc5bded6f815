"""Recurring entries: once per tick, whichever worker process inserts first."""

from __future__ import annotations

import datetime
import itertools
import threading
import time

import psycopg_pool

from ferryman_worker.db import connect
from ferryman_worker.queue import Registry, cron, job
from ferryman_worker.queue.wakeups import CronManager


def _fast_clock(start: datetime.datetime) -> object:
    """A clock on which a minute passes every 0.2 s of real time."""
    origin = time.monotonic()
    return lambda: start + datetime.timedelta(seconds=(time.monotonic() - origin) * 300)


def test_two_workers_enqueue_each_tick_exactly_once(db_url: str) -> None:
    registry = Registry()

    @cron("* * * * *", registry=registry)
    @job("test.tick", registry=registry)
    def tick() -> None:
        """Never run here: the test counts the jobs the managers enqueue."""

    start = datetime.datetime(2026, 1, 1, 12, 0, 30, tzinfo=datetime.UTC)
    stopping = threading.Event()
    pools = [connect.make_pool(db_url, 2) for _ in range(2)]
    managers = [
        CronManager(pool, registry.cron, stopping, clock=_fast_clock(start))  # type: ignore[arg-type]
        for pool in pools
    ]
    threads = [threading.Thread(target=m.run) for m in managers]
    for pool in pools:
        pool.open(wait=True)
    try:
        for t in threads:
            t.start()
        time.sleep(1.5)  # about seven simulated minutes
    finally:
        stopping.set()
        for t in threads:
            t.join(5)
        for pool in pools:
            pool.close()
    with connect.connect(db_url) as conn:
        rows = conn.execute("SELECT cron_key, run_at FROM ferryman_jobs ORDER BY run_at").fetchall()
    ticks = [row["run_at"] for row in rows]
    assert len(ticks) >= 5
    assert len({row["cron_key"] for row in rows}) == len(rows)  # one job per tick
    assert ticks[0] == datetime.datetime(2026, 1, 1, 12, 1, tzinfo=datetime.UTC)
    gaps = {(b - a).total_seconds() for a, b in itertools.pairwise(ticks)}  # type: ignore[operator]
    assert gaps == {60.0}
    assert isinstance(pools[0], psycopg_pool.ConnectionPool)
