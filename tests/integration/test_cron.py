"""Recurring entries: once per tick, whichever worker process inserts first."""

from __future__ import annotations

import datetime
import itertools
import threading
import time

from net import wait_for
from workers import scalar

from ferryman_worker.db import connect
from ferryman_worker.queue import Registry, cron, job
from ferryman_worker.queue.registry import CronEntry
from ferryman_worker.queue.wakeups import CronManager


def _fast_clock(start: datetime.datetime) -> object:
    """A clock on which a minute passes every 0.2 s of real time."""
    origin = time.monotonic()
    return lambda: start + datetime.timedelta(seconds=(time.monotonic() - origin) * 300)


class _Counting(CronManager):
    """A CronManager that counts its enqueue attempts (each still goes to the database)."""

    attempts = 0

    def _enqueue(self, entry: CronEntry, tick: datetime.datetime) -> None:
        self.attempts += 1
        super()._enqueue(entry, tick)


def test_two_workers_enqueue_each_tick_exactly_once(db_url: str) -> None:
    """Both managers try every tick; the database keeps one job per tick, and none is missed."""
    registry = Registry()

    @cron("* * * * *", registry=registry)
    @job("test.tick", registry=registry)
    def tick() -> None:
        """Never run here: the test counts the jobs the managers enqueue."""

    start = datetime.datetime(2026, 1, 1, 12, 0, 30, tzinfo=datetime.UTC)
    stopping = threading.Event()
    pools = [connect.make_pool(db_url, 2) for _ in range(2)]
    managers = [
        _Counting(pool, registry.cron, stopping, clock=_fast_clock(start))  # type: ignore[arg-type]
        for pool in pools
    ]
    threads = [threading.Thread(target=m.run) for m in managers]
    for pool in pools:
        pool.open(wait=True)
    try:
        for t in threads:
            t.start()
        wait_for(lambda: scalar(db_url, "SELECT count(*) FROM ferryman_jobs") >= 6, 20, "6 ticks")
        # a manager sleeps up to a second (five simulated minutes) and then catches up
        wait_for(lambda: all(m.attempts >= 6 for m in managers), 20, "both to try 6 ticks")
    finally:
        stopping.set()
        for t in threads:
            t.join(5)
        for pool in pools:
            pool.close()
    with connect.connect(db_url) as conn:
        rows = conn.execute("SELECT cron_key, run_at FROM ferryman_jobs ORDER BY run_at").fetchall()
    ticks = [row["run_at"] for row in rows]
    assert len(set(ticks)) == len(ticks)  # one job per tick, though both managers tried each
    # the first tick after the managers started (the fast clock ran while threads started)
    assert ticks[0] > start and ticks[0].second == 0 and ticks[0].microsecond == 0
    gaps = {(b - a).total_seconds() for a, b in itertools.pairwise(ticks)}  # type: ignore[operator]
    assert gaps == {60.0}  # no tick missed
