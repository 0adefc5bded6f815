"""The worker's Prometheus metrics: the metric objects, the cheap calls the capsule and the
engine make to record, and the scrape-time collector of queue depths.

Recording is off until ``enable()`` (the worker calls it when it serves ``/metrics``): every
hook returns at once while off, so ``ferryman run`` and the benchmarks pay nothing. Each hook is
a few counter increments on label sets that are bounded (see ``docs/decisions.md``):

- ``queue``/``lane`` and ``job``: the lanes of the process and the registered job names;
- ``kind``: the kinds of the installed providers; ``outcome``: a fixed handful of values;
- ``credential``: the budget key of a source credential (a hash of base URL and token, the key
  of its ``ferryman_rate_budgets`` row), never the token;
- ``run``: ``namespace/name`` of the runs this process worked on. They are the only labels that
  come and go: a run's series are removed once a scrape has shown them after the run ended.

The queue depths are read by one query at scrape time, cached ``ttl`` seconds, on a pooled
connection with a short timeout: a busy pool or a slow database costs a stale answer, never a
lane thread's connection. This module never logs or labels a secret.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Protocol

import psycopg
import psycopg_pool
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ferryman_worker import jobstats
from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection

log = logging.getLogger("ferryman.metrics")

REGISTRY = CollectorRegistry()
"""The worker's metrics (its own registry: nothing a library registers globally leaks in), with
the process's (``process_*``: CPU, memory, file descriptors) and Python's (``python_*``)."""
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

_SHORT = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# -- the capsule ---------------------------------------------------------------------------------

JOBS = jobstats.JobStats()
"""Jobs claimed and finished, their durations and wake-ups, busy lane threads: counted per
thread without locks (``jobstats``), under the names ``ferryman_jobs_claimed_total``,
``ferryman_jobs_finished_total``, ``ferryman_job_duration_seconds``,
``ferryman_job_wake_latency_seconds``, ``ferryman_lane_threads``, ``ferryman_lane_threads_busy``."""
REGISTRY.register(JOBS)

# -- the engine ----------------------------------------------------------------------------------

ROWS = Counter(
    "ferryman_rows",
    "Source rows by outcome: written, skipped (the ledger already held them), matched (by the "
    "kind's natural key, to rows the application already had), malformed (recorded as row "
    "errors, not written). Per run (namespace/name) and kind; a run's series "
    "go away after it ends.",
    ["run", "kind", "outcome"],
    registry=REGISTRY,
)
WINDOW_SECONDS = Histogram(
    "ferryman_window_commit_seconds",
    "Seconds to write and commit one window (its rows, row errors and checkpoint).",
    ["kind"],
    buckets=_SHORT,
    registry=REGISTRY,
)
SOURCE_CALLS = Counter(
    "ferryman_source_calls",
    "Calls to the source API by outcome: 2xx, 4xx, 429, 5xx, timeout, error (no answer).",
    ["credential", "outcome"],
    registry=REGISTRY,
)
SOURCE_SECONDS = Histogram(
    "ferryman_source_call_seconds",
    "Seconds a source call took, whatever its outcome.",
    ["credential"],
    buckets=_SHORT,
    registry=REGISTRY,
)
TOKENS_LEASED = Counter(
    "ferryman_source_tokens_leased",
    "Rate-limit tokens this worker leased from the credential's shared budget (credentials "
    "with a declared budget only).",
    ["credential"],
    registry=REGISTRY,
)
TOKENS_SPENT = Counter(
    "ferryman_source_tokens_spent",
    "Rate-limit tokens reserved for calls (a listing's or a body's cost), retries included.",
    ["credential"],
    registry=REGISTRY,
)
TOKEN_WAIT = Counter(
    "ferryman_source_token_wait_seconds",
    "Seconds job threads waited for tokens (the budget empty or paused), summed over threads.",
    ["credential"],
    registry=REGISTRY,
)
PAUSED = Counter(
    "ferryman_source_paused_seconds",
    "Seconds this worker paused the credential's budget after 429s (overlapping pauses count "
    "once).",
    ["credential"],
    registry=REGISTRY,
)
IN_FLIGHT = Gauge(
    "ferryman_source_calls_in_flight", "Source calls being made now.", registry=REGISTRY
)
FETCH_THREADS = Gauge(
    "ferryman_fetch_threads",
    "Fetch threads of the tree walks running now (utilisation: calls in flight / these).",
    registry=REGISTRY,
)

_on = False


def enable() -> None:
    """Start recording (the worker does when it serves ``/metrics``)."""
    global _on
    _on = True


def disable() -> None:
    global _on
    _on = False


def enabled() -> bool:
    return _on


def exposition() -> tuple[bytes, str]:
    """The body and content type of a ``GET /metrics`` answer."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


# -- hooks: the capsule --------------------------------------------------------------------------


def lanes(widths: dict[str, int]) -> None:
    """The process's lanes and their threads."""
    if _on:
        JOBS.lanes = dict(widths)


def job_started(queue: str, job: str, waited: float) -> jobstats.Started | None:
    """A job was claimed ``waited`` seconds after it was due; returns what to hand to
    ``job_ended`` (None while not recording)."""
    return JOBS.started(queue, job, waited) if _on else None


def job_ended(started: jobstats.Started | None, outcome: str) -> None:
    """The claimed job's outcome (the value of ``runner.Outcome``) has been decided."""
    if started is not None:
        JOBS.ended(started, outcome)


# -- hooks: the engine ---------------------------------------------------------------------------


class Outcomes(Protocol):
    """A window's records by outcome (the engine's ``windows.Counts``)."""

    written: int
    skipped: int
    matched: int
    failed: int


def window(run: tuple[int, str], kind: str, counts: Outcomes, seconds: float) -> None:
    """A window committed: its rows by outcome, and how long it took."""
    if not _on:
        return
    run_id, name = run
    _runs.seen(run_id, name)
    for outcome, count in (
        ("written", counts.written),
        ("skipped", counts.skipped),
        ("matched", counts.matched),
        ("malformed", counts.failed),
    ):
        ROWS.labels(name, kind, outcome).inc(count)
    WINDOW_SECONDS.labels(kind).observe(seconds)


def source_call(credential: str, status: int | None, timed_out: bool, seconds: float) -> None:
    """A source call ended: its HTTP status (None: no answer) and how long it took."""
    if not _on:
        return
    SOURCE_CALLS.labels(credential, call_outcome(status, timed_out)).inc()
    SOURCE_SECONDS.labels(credential).observe(seconds)


def call_outcome(status: int | None, timed_out: bool) -> str:
    if status is None:
        return "timeout" if timed_out else "error"
    if status == 429:
        return "429"
    return f"{min(max(status // 100, 1), 5)}xx"


@contextlib.contextmanager
def in_flight() -> Iterator[None]:
    """Around one source call."""
    if not _on:
        yield
        return
    IN_FLIGHT.inc()
    try:
        yield
    finally:
        IN_FLIGHT.dec()


@contextlib.contextmanager
def fetch_threads(count: int) -> Iterator[None]:
    """Around a tree walk's pool of ``count`` fetch threads."""
    if not _on:
        yield
        return
    FETCH_THREADS.inc(count)
    try:
        yield
    finally:
        FETCH_THREADS.dec(count)


def tokens(credential: str, *, leased: float = 0.0, spent: float = 0.0) -> None:
    if _on:
        if leased:
            TOKENS_LEASED.labels(credential).inc(leased)
        if spent:
            TOKENS_SPENT.labels(credential).inc(spent)


def token_wait(credential: str, seconds: float) -> None:
    if _on:
        TOKEN_WAIT.labels(credential).inc(seconds)


def paused(credential: str, seconds: float) -> None:
    if _on and seconds > 0:
        PAUSED.labels(credential).inc(seconds)


# -- a run's series come and go ------------------------------------------------------------------


class _Runs:
    """The runs with series in ``ROWS``; an ended run's go once a scrape has shown them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[int, str] = {}
        self._ended: set[int] = set()

    def seen(self, run_id: int, name: str) -> None:
        if run_id not in self._names:
            with self._lock:
                self._names[run_id] = name

    def ids(self) -> list[int]:
        with self._lock:
            return list(self._names)

    def ended(self, ended: Iterable[int]) -> None:
        """Runs found ended: those found ended at the previous look lose their series now (a
        scrape has shown their last values since); these are marked for the next look."""
        ended = set(ended)
        with self._lock:
            gone = {run_id: self._names.pop(run_id) for run_id in self._ended if run_id in ended}
            self._ended = ended - set(gone)
        for name in gone.values():
            _remove_run(name)


def _remove_run(name: str) -> None:
    for labels in [key for key in _label_sets(ROWS) if key[0] == name]:
        ROWS.remove(*labels)


def _label_sets(metric: Counter) -> list[tuple[str, ...]]:
    families = metric.collect()
    keys = set()
    for family in families:
        for sample in family.samples:
            if sample.name.endswith("_total"):
                keys.add(tuple(sample.labels[name] for name in ("run", "kind", "outcome")))
    return sorted(keys)


_runs = _Runs()


# -- the scrape-time collector -------------------------------------------------------------------


class QueueDepth(Collector):
    """Ready and scheduled jobs per queue and the oldest ready job's age, by one query cached
    ``ttl`` seconds; the same look retires the series of ended runs. Registered once; it reads
    through the pool of the worker that ``watch``es it (none: no queue series)."""

    def __init__(self, ttl: float = 5.0, timeout: float = 2.0) -> None:
        self._pool: psycopg_pool.ConnectionPool[Connection] | None = None
        self._ttl = ttl
        self._timeout = timeout
        self._lock = threading.Lock()
        self._at = float("-inf")
        self._rows: list[dict[str, object]] = []

    def watch(self, pool: psycopg_pool.ConnectionPool[Connection] | None) -> None:
        with self._lock:
            self._pool, self._rows, self._at = pool, [], float("-inf")

    def forget(self, pool: psycopg_pool.ConnectionPool[Connection]) -> None:
        """Stop reading through ``pool`` if it is the one watched."""
        if self._pool is pool:
            self.watch(None)

    def describe(self) -> Iterable[Metric]:
        return self._families([])

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            if self._pool is not None and time.monotonic() - self._at >= self._ttl:
                self._refresh(self._pool)
            rows = list(self._rows)
        return self._families(rows)

    def _refresh(self, pool: psycopg_pool.ConnectionPool[Connection]) -> None:
        try:
            with pool.connection(timeout=self._timeout) as conn:
                self._rows = conn.execute(queries.get("queue_depth", "metrics.sql")).fetchall()
                run_ids = _runs.ids()
                if run_ids:
                    found = conn.execute(queries.get("ended_runs", "metrics.sql"), {"ids": run_ids})
                    _runs.ended(int(row["id"]) for row in found)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            log.warning("metrics: could not read the queue depths (%s)", type(exc).__name__)
            return  # the last answer stays; try again at the next scrape
        self._at = time.monotonic()

    @staticmethod
    def _families(rows: list[dict[str, object]]) -> list[Metric]:
        ready = GaugeMetricFamily(
            "ferryman_queue_ready_jobs", "Jobs due and not claimed, per queue.", labels=["queue"]
        )
        scheduled = GaugeMetricFamily(
            "ferryman_queue_scheduled_jobs",
            "Jobs not yet due (scheduled, or waiting out a retry's backoff), per queue.",
            labels=["queue"],
        )
        oldest = GaugeMetricFamily(
            "ferryman_queue_oldest_ready_seconds",
            "Age of the oldest ready job, per queue (0: none ready).",
            labels=["queue"],
        )
        for row in rows:
            queue = str(row["queue"])
            ready.add_metric([queue], float(row["ready"]))  # type: ignore[arg-type]
            scheduled.add_metric([queue], float(row["scheduled"]))  # type: ignore[arg-type]
            oldest.add_metric([queue], float(row["oldest_ready_seconds"]))  # type: ignore[arg-type]
        return [ready, scheduled, oldest]


QUEUES = QueueDepth()
REGISTRY.register(QUEUES)


def watch_queues(pool: psycopg_pool.ConnectionPool[Connection]) -> None:
    """Read the queue depths through ``pool`` (when recording)."""
    if _on:
        QUEUES.watch(pool)


def unwatch(pool: psycopg_pool.ConnectionPool[Connection]) -> None:
    """``pool`` is closing: stop reading through it."""
    QUEUES.forget(pool)
