"""The three things that wake a lane thread besides its own loop.

- ``Notifier``: holds a ``LISTEN ferryman_jobs`` connection and wakes a queue's lane within
  milliseconds of an enqueue's commit: as many of its threads as the notification says jobs
  are due (``queue:n:id``). After any reconnect it wakes every lane, since notifications sent while
  it was away are gone.
- ``Poller``: wakes every lane every ``interval`` seconds (a missed notification makes a job
  late, never lost) and each lane at the times its scheduled jobs fall due. Every second it also
  runs the worker's liveness check: whether another worker process died (its LISTEN backend is
  gone), whose claims died with it and are freed for the lanes to take over at once.
- ``CronManager``: inserts one job per recurring entry and tick; a unique key on the tick makes
  every other worker process's insert a no-op, so each tick runs once.
"""

from __future__ import annotations

import datetime
import heapq
import logging
import threading
import time
from collections.abc import Callable, Mapping

import psycopg
import psycopg_pool
from cronsim import CronSim

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.queue.lanes import Lane
from ferryman_worker.queue.registry import CronEntry

log = logging.getLogger("ferryman.queue")
CHANNEL = "ferryman_jobs"


class Poller:
    """Wakes all lanes every ``interval`` seconds and single lanes at scheduled times."""

    def __init__(
        self,
        lanes: Mapping[str, Lane],
        interval: float,
        stopping: threading.Event,
        someone_died: Callable[[], bool] = lambda: False,
        liveness_interval: float = 1.0,
    ) -> None:
        self._lanes = lanes
        self._interval = interval
        self._stopping = stopping
        self._someone_died = someone_died
        self._liveness_interval = liveness_interval
        self._cond = threading.Condition()
        self._timers: list[tuple[float, str]] = []

    def wake_at(self, queue: str, epoch: float) -> None:
        """Wake ``queue``'s lane at ``epoch`` (seconds since 1970, UTC)."""
        if queue not in self._lanes:
            return
        with self._cond:
            heapq.heappush(self._timers, (epoch, queue))
            self._cond.notify()

    def wake_all(self) -> None:
        for lane in self._lanes.values():
            lane.wake()

    def stop(self) -> None:
        with self._cond:
            self._cond.notify()

    def run(self) -> None:
        next_poll = time.time() + self._interval
        next_check = time.time() + self._liveness_interval
        while not self._stopping.is_set():
            now = time.time()
            if now >= next_check:
                next_check = now + self._liveness_interval
                try:
                    if self._someone_died():
                        next_poll = now
                except Exception:  # never let the poller die: it is the safety net
                    log.exception("the worker's liveness check failed")
            if now >= next_poll:
                self.wake_all()
                next_poll = now + self._interval
            self._fire_due(now)
            with self._cond:
                due = min([next_poll, next_check, *(t for t, _ in self._timers[:1])])
                self._cond.wait(max(0.0, due - time.time()))

    def _fire_due(self, now: float) -> None:
        with self._cond:
            due = []
            while self._timers and self._timers[0][0] <= now:
                due.append(heapq.heappop(self._timers)[1])
        for queue in set(due):
            self._lanes[queue].wake(due.count(queue))


class Notifier:
    """LISTENs on its own pooled connection and dispatches notifications to lanes."""

    def __init__(
        self,
        pool: psycopg_pool.ConnectionPool[Connection],
        lanes: Mapping[str, Lane],
        poller: Poller,
        stopping: threading.Event,
        on_listen: Callable[[Connection], None] = lambda conn: None,
    ) -> None:
        self._pool = pool
        self._lanes = lanes
        self._poller = poller
        self._stopping = stopping
        self._on_listen = on_listen
        self._lost = False
        self.listening = threading.Event()

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._listen()
            except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                if self.listening.is_set():
                    self._lost = True
                    log.warning(
                        "notifier lost its connection (%s); reconnecting", type(exc).__name__
                    )
                self.listening.clear()
                self._stopping.wait(0.1)  # the pool's connection() waits for the database

    def _listen(self) -> None:
        with self._pool.connection() as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            self._on_listen(conn)
            if self._lost:
                log.info("notifier listening again")
            self._lost = False
            self.listening.set()
            self._poller.wake_all()  # whatever was enqueued while no one listened
            while not self._stopping.is_set():
                for notify in conn.notifies(timeout=1.0):
                    self.dispatch(notify.payload)

    def dispatch(self, payload: str) -> None:
        """``queue:n[:id]``: wake n threads of the queue's lane; ``queue|epoch``: schedule a
        wake-up; ``queue``: wake every thread of the lane."""
        queue, _, due = payload.partition("|")
        queue, _, count = queue.partition(":")
        count = count.partition(":")[0]
        lane = self._lanes.get(queue)
        if lane is None:
            return
        if due and float(due) > time.time():
            self._poller.wake_at(queue, float(due))
        else:
            lane.wake(int(count) if count.isdigit() else (1 if due else None))


class CronManager:
    """Enqueues recurring entries at their ticks (UTC), once per tick across processes."""

    def __init__(
        self,
        pool: psycopg_pool.ConnectionPool[Connection],
        entries: list[CronEntry],
        stopping: threading.Event,
        clock: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        self._pool = pool
        self._entries = entries
        self._stopping = stopping
        self._clock = clock or (lambda: datetime.datetime.now(datetime.UTC))

    def run(self) -> None:
        if not self._entries:
            return
        upcoming = [(self._next_tick(e, self._clock()), i) for i, e in enumerate(self._entries)]
        while not self._stopping.is_set():
            tick, index = min(upcoming)
            wait = (tick - self._clock()).total_seconds()
            if wait > 0 and self._stopping.wait(min(wait, 1.0)):
                return
            if wait > 0:
                continue
            self._enqueue(self._entries[index], tick)
            upcoming[index] = (self._next_tick(self._entries[index], tick), index)

    def _enqueue(self, entry: CronEntry, tick: datetime.datetime) -> None:
        options = entry.job.options
        params = {
            "queue": options.queue,
            "name": entry.job.name,
            "priority": options.priority,
            "max_attempts": options.max_attempts,
            "run_at": tick,
            "cron_key": f"{entry.job.name}@{tick.isoformat()}",
        }
        try:
            with self._pool.connection() as conn:
                conn.execute(queries.get("enqueue_cron"), params)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            log.warning("cron: could not enqueue %s for %s: %s", entry.job.name, tick, exc)

    @staticmethod
    def _next_tick(entry: CronEntry, after: datetime.datetime) -> datetime.datetime:
        tick: datetime.datetime = next(iter(CronSim(entry.schedule, after)))
        return tick
