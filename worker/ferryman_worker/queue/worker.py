"""The capsule: one worker process, a lane (its own thread pool) per queue, plus the notifier,
poller, cron manager and heartbeat threads.

A lane thread borrows a pooled connection, claims jobs on it and runs them one after another
while its queue has due work, then gives the connection back (which drops any lock left) and
sleeps until something wakes the lane. On SIGTERM no thread claims again; running jobs get
``shutdown_grace`` seconds, then the process exits and their locks go with their connections.
"""

from __future__ import annotations

import contextvars
import functools
import gc
import importlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import psycopg_pool

from ferryman_worker import health, logs, metrics
from ferryman_worker.db import connect, migrate, queries
from ferryman_worker.errors import ConfigurationError, DatabaseError
from ferryman_worker.queue import batches, claims, producer, runner
from ferryman_worker.queue.lanes import Lane
from ferryman_worker.queue.pressure import PressureGauge
from ferryman_worker.queue.registry import Registry, default_registry
from ferryman_worker.queue.wakeups import CronManager, Notifier, Poller
from ferryman_worker.settings import Settings

log = logging.getLogger("ferryman.queue")


YOUNG_OBJECTS = 20_000
"""Allocations between two collections of the cyclic garbage collector's youngest generation
(Python's default: 700). A page of records allocates tens of thousands of short-lived objects,
which reference counting frees; at 700 the collector ran every few rows."""


def settle_heap() -> None:
    """Call once a worker process has imported and configured everything, before it claims:
    what start-up allocated (modules, models, settings) is moved out of the cyclic collector's
    sight, and its youngest generation is made larger (``YOUNG_OBJECTS``). In an import of
    100,000 organizations the collector's share of the worker's CPU fell from 6 % to 2.6 %."""
    gc.freeze()
    gc.set_threshold(YOUNG_OBJECTS, 20, 20)


def import_modules(names: list[str]) -> None:
    """Import the modules that define job functions; ConfigurationError names a missing one."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigurationError(
                f"--import {name}: cannot import it ({exc}); check the module name and that it "
                "is installed or on PYTHONPATH"
            ) from None


class Worker:
    """One capsule process. ``start`` returns once the threads run; ``stop`` ends them."""

    def __init__(
        self,
        settings: Settings,
        database_url: str,
        registry: Registry | None = None,
        resources: dict[str, Any] | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry or default_registry
        self.pool = connect.make_pool(database_url, settings.effective_pool_size)
        self.lanes = {spec.name: Lane(spec) for spec in settings.lane_specs}
        self.stopping = threading.Event()
        self.runner = runner.Runner(
            self.registry,
            runner.Backoff(settings.backoff_base, settings.backoff_cap),
            PressureGauge(settings.pressure_threshold),
            resources or {},
        )
        self.poller = Poller(
            self.lanes, settings.poll_interval, self.stopping, someone_died=self._liveness
        )
        self.notifier = Notifier(
            self.pool, self.lanes, self.poller, self.stopping, on_listen=self._on_listen
        )
        self.cron = CronManager(self.pool, self.registry.cron, self.stopping)
        self._lane_threads: list[threading.Thread] = []
        self._service_threads: list[threading.Thread] = []
        self._running = 0
        self._running_lock = threading.Lock()
        self._free_claims = threading.Event()  # a claim may have died: free dead claims soon
        self._freed_at = time.monotonic()
        self._lane_errors = 0
        self._unchecked: set[int] = set()  # batches whose finish check failed: checked again
        self._troubled: dict[str, str] = {}  # lane thread -> the unexpected error it recovers from
        self.worker_id: int | None = None
        self._beat_at = time.monotonic()  # the start counts as a beat: live while starting up
        self._lanes_started = False
        self.health = (
            health.HealthServer(self, settings.metrics_port) if settings.metrics_port else None
        )
        if self.health is not None:
            metrics.enable()  # record what /metrics serves

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Serve the health endpoint, open the pool, check the schema, and start every thread."""
        if self.health is not None:
            self.health.start()
        connect.open_pool(self.pool)
        with self.pool.connection() as conn:
            migrate.check_current(conn)
            row = conn.execute(queries.get("new_worker_id")).fetchone()
            assert row is not None
            self.worker_id = int(row["id"])
        producer.configure(self.pool)
        metrics.lanes({lane.name: lane.spec.width for lane in self.lanes.values()})
        metrics.watch_queues(self.pool)
        self._spawn(self._service_threads, "notifier", self.notifier.run)
        if not self.notifier.listening.wait(30):
            raise DatabaseError("the notifier could not LISTEN within 30s")
        self._spawn(self._service_threads, "poller", self.poller.run)
        self._spawn(self._service_threads, "cron", self.cron.run)
        self._spawn(self._service_threads, "heartbeat", self._heartbeat)
        for lane in self.lanes.values():
            for index in range(lane.spec.width):
                self._spawn(
                    self._lane_threads,
                    f"lane-{lane.name}-{index}",
                    functools.partial(self._lane_loop, lane),
                )
        self._lanes_started = True
        log.info(
            "worker %s started: lanes %s, pool %d",
            self.worker_id,
            self.settings.lanes,
            self.settings.effective_pool_size,
        )

    def stop(self, grace: float | None = None) -> bool:
        """Stop claiming, wait up to ``grace`` seconds for running jobs; True if all ended."""
        grace = self.settings.shutdown_grace if grace is None else grace
        self.stopping.set()
        self.poller.stop()
        for lane in self.lanes.values():
            lane.wake()
        deadline = time.monotonic() + grace
        for thread in self._lane_threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        finished = not any(thread.is_alive() for thread in self._lane_threads)
        if finished:
            self._unregister()
            for thread in self._service_threads:
                thread.join(5.0)
            self.pool.close()
        else:
            log.warning(
                "%d jobs still running after %.0fs; exiting: they run again elsewhere",
                self.running,
                grace,
            )
        producer.configure(None)
        metrics.unwatch(self.pool)
        if self.health is not None:
            self.health.stop()
        return finished

    def run_until_signal(self) -> int:
        """Start, serve until SIGTERM or SIGINT, stop; returns the process exit code."""
        got = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: got.set())
        self.start()
        while not got.wait(1.0):
            pass
        log.info("signal received: no new claims, %d jobs running", self.running)
        if not self.stop():
            os._exit(0)  # the running jobs' connections die with us, and their claims with them
        return 0

    @property
    def running(self) -> int:
        return self._running

    # -- health (health.Probe) ----------------------------------------------------------------

    def liveness(self) -> tuple[bool, str]:
        """Live while the heartbeat is fresh (3 intervals), or while shutting down on purpose."""
        if self.stopping.is_set():
            return True, "shutting down"
        age = time.monotonic() - self._beat_at
        limit = 3 * self.settings.heartbeat_interval
        if age > limit:
            return False, f"no heartbeat for {age:.0f}s (limit {limit:.0f}s)"
        return True, f"heartbeat {age:.0f}s ago"

    def readiness(self) -> tuple[bool, str]:
        """Ready once the lanes run and the notifier LISTENs; not while stopping."""
        if self.stopping.is_set():
            return False, "shutting down"
        if not self._lanes_started:
            return False, "starting"
        if not self.notifier.listening.is_set():
            return False, "notifier not listening (reconnecting to the database)"
        stopped = [thread.name for thread in self._lane_threads if not thread.is_alive()]
        if stopped:
            return False, f"lane threads not running: {', '.join(stopped)}"
        troubled = dict(self._troubled)
        if troubled:
            why = "; ".join(f"{name}: {error}" for name, error in sorted(troubled.items()))
            return False, f"lane threads failing (retrying): {why}"
        return True, f"lanes {self.settings.lanes} running"

    # -- threads ------------------------------------------------------------------------------

    def _spawn(self, group: list[threading.Thread], name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        group.append(thread)

    def _lane_loop(self, lane: Lane) -> None:
        """Drain ``lane`` whenever it is woken, until the worker stops. Survives any exception
        a job or the machinery raises: a database error is retried at once (the pool waits for
        the database), anything else after a pause, while ``/readyz`` names the thread."""
        failing = False
        name = threading.current_thread().name
        while not self.stopping.is_set():
            try:
                self._drain(lane)
                self._check_unchecked()
            except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                failing = self._lane_failed(lane, exc, failing)
                self.stopping.wait(0.1)  # the pool's connection() waits for the database
                continue
            except BaseException as exc:  # a job's SystemExit too: the thread must go on
                self._troubled[name] = f"{type(exc).__name__}: {exc}"[:200]
                log.exception("lane %s: %s raised; the thread goes on", lane.name, name)
                self.stopping.wait(1.0)
                continue
            if failing:
                failing = self._lane_recovered(lane)
            self._troubled.pop(name, None)
            lane.wait(self.settings.poll_interval if not self._unchecked else 0.1)

    def _lane_failed(self, lane: Lane, exc: Exception, failing: bool) -> bool:
        """Log a lane's first database error of an outage (the rest at DEBUG)."""
        if not failing:
            with self._running_lock:
                self._lane_errors += 1
                first = self._lane_errors == 1
            if first:
                log.warning("lane %s: database error (%s); retrying", lane.name, type(exc).__name__)
        log.debug("lane %s: database error: %s", lane.name, exc)
        return True

    def _lane_recovered(self, lane: Lane) -> bool:
        with self._running_lock:
            self._lane_errors -= 1
            last = self._lane_errors == 0
        if last:
            log.info("lane %s: the database answers again", lane.name)
        return False

    def _drain(self, lane: Lane) -> None:
        """Claim and run jobs of ``lane`` on one connection while it has work announced (or is
        draining). Each claim also releases the job before it: one round trip between two jobs.
        After a job with a concurrency key, claim again: its key may have held others back."""
        previous: claims.Finished | None = None
        running: claims.JobRecord | None = None
        check: int | None = None  # a batch whose member's end the last claim committed
        lane.should_claim()  # this thread was woken for a job: spend its credit
        with self.pool.connection() as conn:
            try:
                while not self.stopping.is_set():
                    seen = lane.generation
                    job = claims.claim(conn, lane.name, self.settings.claim_window, previous, check)
                    check, previous = claims.batch_to_check(previous, job), None
                    if job is None:
                        if lane.found_nothing(seen):
                            break
                        continue
                    running = job
                    previous = self._run_claimed(conn, job)
                    running = None
                    if job.concurrency_key is None and not lane.should_claim():
                        break
            finally:
                self._settle(conn, previous, running, check)

    def _settle(
        self,
        conn: connect.Connection,
        previous: claims.Finished | None,
        running: claims.JobRecord | None,
        check: int | None,
    ) -> None:
        """Before the connection goes back to the pool: release a finished job's claim, or give
        up the claim of a job that ended without an outcome (a database error)."""
        if conn.broken:  # its backend is gone, or going
            self._settle_failed(previous, check, "the connection is lost")
            return
        try:
            if running is not None:
                claims.unclaim(conn, running)
                if check is not None:
                    batches.try_finish(conn, check)
            elif previous is not None:
                claims.release(conn, previous, check)
            elif check is not None:
                batches.try_finish(conn, check)
        except psycopg.Error as exc:
            self._settle_failed(previous, check, type(exc).__name__)

    def _settle_failed(self, previous: claims.Finished | None, check: int | None, why: str) -> None:
        """A claim may have kept its mark and lost its lock (the pool's reset drops it): free it
        soon. The batches whose last member's end this may have been are checked again."""
        self._free_claims.set()
        left = previous.job.batch_id if previous and previous.left_batch else None
        unchecked = {batch for batch in (check, left) if batch is not None}
        if not unchecked:
            return
        log.warning(
            "batch %s: the finish check failed (%s); checking again",
            ", ".join(map(str, sorted(unchecked))),
            why,
        )
        with self._running_lock:
            self._unchecked |= unchecked

    def _check_unchecked(self) -> None:
        """Check again the batches whose finish check failed; a failure keeps them for the
        next turn (the lane loop comes back within 0.1 s while any is left)."""
        with self._running_lock:
            pending, self._unchecked = self._unchecked, set()
        if not pending:
            return
        done = set(pending)
        try:
            with self.pool.connection() as conn:
                for batch_id in sorted(pending):
                    batches.try_finish(conn, batch_id)
                    pending.discard(batch_id)
        finally:
            if pending:
                with self._running_lock:
                    self._unchecked |= pending
            else:
                log.info("batch %s: checked again", ", ".join(map(str, sorted(done))))

    def _run_claimed(self, conn: connect.Connection, job: claims.JobRecord) -> claims.Finished:
        with self._running_lock:
            self._running += 1
        started = metrics.job_started(job.queue, job.name, job.waited)
        outcome = "interrupted"  # no outcome: the database failed mid-job, it runs again
        try:
            # each job in a context of its own: the ids it binds for its log lines end with it
            result = contextvars.copy_context().run(self._run_logged, conn, job)
            outcome = result.value
            return runner.finished(job, result)
        finally:
            metrics.job_ended(started, outcome)
            with self._running_lock:
                self._running -= 1

    def _run_logged(self, conn: connect.Connection, job: claims.JobRecord) -> runner.Outcome:
        logs.job_id.set(job.id)
        return self.runner.run(conn, job, defer_success=True)

    def _on_listen(self, conn: connect.Connection) -> None:
        """The notifier (re)connected: register, and free the claims a lost database took."""
        self._register(conn)
        self._free_claims.set()

    def _register(self, conn: connect.Connection) -> None:
        conn.execute(
            queries.get("register_worker"),
            {
                "id": self.worker_id,
                "hostname": socket.gethostname(),
                "pid": os.getpid(),
                "lanes": self.settings.lanes,
            },
        )

    def _liveness(self) -> bool:
        """Every second (from the poller): reap worker processes that are gone and free dead
        claims, when one is gone, when asked, and every poll interval. True when it woke lanes."""
        try:
            with self.pool.connection(timeout=1.0) as conn:
                dead = self._reap_dead_workers(conn)
                due = time.monotonic() - self._freed_at >= self.settings.poll_interval
                if not (dead or due or self._free_claims.is_set()):
                    return False
                self._free_claims.clear()
                self._freed_at = time.monotonic()
                freed = conn.execute(queries.get("free_dead_claims")).fetchall()
        except (psycopg.Error, psycopg_pool.PoolTimeout):
            return False
        for row in freed:
            log.info("%d dead claim(s) of queue %s freed", row["freed"], row["queue"])
        return dead

    def _reap_dead_workers(self, conn: connect.Connection) -> bool:
        """True when another worker process died (or lost its connection) since the last look."""
        params = {"self": self.worker_id, "grace": 3 * self.settings.heartbeat_interval}
        dead = conn.execute(queries.get("reap_dead_workers"), params).fetchall()
        for row in dead:
            log.warning(
                "worker %s (pid %s on %s) died or lost its connection; its claims are freed",
                row["id"],
                row["pid"],
                row["hostname"],
            )
        return bool(dead)

    def _heartbeat(self) -> None:
        while not self.stopping.wait(self.settings.heartbeat_interval):
            try:
                with self.pool.connection() as conn:
                    conn.execute(queries.get("heartbeat"), {"id": self.worker_id})
                self._beat_at = time.monotonic()
            except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                log.warning("heartbeat failed: %s", type(exc).__name__)

    def _unregister(self) -> None:
        try:
            with self.pool.connection(timeout=5) as conn:
                conn.execute(queries.get("unregister_worker"), {"id": self.worker_id})
        except (psycopg.Error, psycopg_pool.PoolTimeout):
            pass
