"""The per-job metrics, kept without locks: each lane thread counts into its own plain objects,
and a collector adds them up at scrape time.

A job costs a claim, a wake-up, an outcome and a duration: recorded through prometheus_client's
metric objects that is six lock round trips and two bucket searches in Python per job, about
4 us, a few per cent of a no-op job's whole cost on the worker. Here it is a thread-local
lookup, a few integer additions and two ``bisect`` calls (C), written out in ``started`` and
``ended`` rather than in helpers: the wake-up comes as seconds from the claim (computed by the
database), not as datetimes to convert. A thread's numbers are written by that thread alone; a
scrape reads them as they are (a value one job old at worst) and sums.
The series and their names are those of ``metrics`` (see its docstring for the labels).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0)
WAKE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
OUTCOMES = {"succeeded": "succeeded", "succeeding": "succeeded", "retrying": "retried"}
"""``runner.Outcome`` values as counted (the rest count as themselves)."""


class _Histogram:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one: above every bound (+Inf)
        self.total = 0.0


class _Job:
    """One thread's numbers for one queue and job name."""

    __slots__ = ("claimed", "outcomes", "seconds", "wake")

    def __init__(self) -> None:
        self.claimed = 0
        self.outcomes: dict[str, int] = {}
        self.seconds = _Histogram(DURATION_BUCKETS)
        self.wake = _Histogram(WAKE_BUCKETS)


class _Thread:
    """One lane thread's numbers; only that thread writes them."""

    __slots__ = ("busy", "jobs")

    def __init__(self) -> None:
        self.busy: str | None = None
        self.jobs: dict[tuple[str, str], _Job] = {}


Started = tuple[_Thread, _Job, float]
"""What ``started`` hands to ``ended``: the thread's and the job's numbers, the start time."""


class JobStats(Collector):
    """The job series of every thread of the process."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._threads: list[_Thread] = []
        self.lanes: dict[str, int] = {}

    def _mine(self) -> _Thread:
        try:
            mine: _Thread = self._local.stats
        except AttributeError:
            mine = self._local.stats = _Thread()
            with self._lock:
                self._threads.append(mine)
        return mine

    def started(self, queue: str, job: str, waited: float) -> Started:
        """A claim, ``waited`` seconds after the job was due: counted, with its wake-up latency;
        its lane thread is busy until ``ended``."""
        try:
            mine: _Thread = self._local.stats
        except AttributeError:
            mine = self._mine()
        stats = mine.jobs.get((queue, job))
        if stats is None:
            stats = mine.jobs[queue, job] = _Job()
        stats.claimed += 1
        wake = stats.wake
        wake.counts[bisect.bisect_left(WAKE_BUCKETS, waited)] += 1
        wake.total += waited
        mine.busy = queue
        return mine, stats, time.monotonic()

    def ended(self, started: Started, outcome: str) -> None:
        mine, stats, began = started
        seconds = time.monotonic() - began
        name = OUTCOMES.get(outcome, outcome)
        outcomes = stats.outcomes
        outcomes[name] = outcomes.get(name, 0) + 1
        duration = stats.seconds
        duration.counts[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1
        duration.total += seconds
        mine.busy = None

    # -- the collector --------------------------------------------------------------------------

    def describe(self) -> Iterable[Metric]:
        return list(self._families([]))

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            threads = list(self._threads)
        return list(self._families(threads))

    def _families(self, threads: list[_Thread]) -> Iterator[Metric]:
        claimed = CounterMetricFamily(
            "ferryman_jobs_claimed", "Jobs claimed by this worker.", labels=["queue", "job"]
        )
        finished = CounterMetricFamily(
            "ferryman_jobs_finished",
            "Claimed jobs by outcome: succeeded, retried (a failed attempt with attempts to "
            "spare), failed (for good), deferred (by database pressure; no attempt counted), "
            "interrupted (the database failed mid-job: no outcome, it runs again).",
            labels=["queue", "job", "outcome"],
        )
        duration = HistogramMetricFamily(
            "ferryman_job_duration_seconds",
            "Seconds from a job's claim to its outcome.",
            labels=["queue", "job"],
        )
        wake = HistogramMetricFamily(
            "ferryman_job_wake_latency_seconds",
            "Seconds from a job being due (its enqueue's commit, or its scheduled or retry time) "
            "to its claim, on the database's clock.",
            labels=["queue"],
        )
        lanes = GaugeMetricFamily("ferryman_lane_threads", "Threads of each lane.", labels=["lane"])
        busy = GaugeMetricFamily(
            "ferryman_lane_threads_busy", "Lane threads running a job.", labels=["lane"]
        )
        jobs: dict[tuple[str, str], list[_Job]] = {}
        wakes: dict[str, list[_Histogram]] = {}
        running: dict[str, int] = dict.fromkeys(self.lanes, 0)
        for thread in threads:
            for key, stats in list(thread.jobs.items()):
                jobs.setdefault(key, []).append(stats)
                wakes.setdefault(key[0], []).append(stats.wake)
            if thread.busy is not None:
                running[thread.busy] = running.get(thread.busy, 0) + 1
        for (queue, job), parts in sorted(jobs.items()):
            claimed.add_metric([queue, job], sum(p.claimed for p in parts))
            outcomes: dict[str, int] = {}
            for part in parts:
                for outcome, count in list(part.outcomes.items()):
                    outcomes[outcome] = outcomes.get(outcome, 0) + count
            for outcome, count in sorted(outcomes.items()):
                finished.add_metric([queue, job, outcome], count)
            duration.add_metric([queue, job], *_buckets([p.seconds for p in parts]))
        for queue, histograms in sorted(wakes.items()):
            wake.add_metric([queue], *_buckets(histograms))
        for lane, width in sorted(self.lanes.items()):
            lanes.add_metric([lane], width)
        for lane, count in sorted(running.items()):
            busy.add_metric([lane], count)
        yield from (claimed, finished, duration, wake, lanes, busy)


def _buckets(parts: list[_Histogram]) -> tuple[list[tuple[str, float]], float]:
    """Cumulative buckets and the sum of several threads' histograms of the same bounds."""
    bounds = parts[0].bounds
    counts = [sum(p.counts[i] for p in parts) for i in range(len(bounds) + 1)]
    cumulative, running = [], 0
    for bound, count in zip([*map(floatToGoString, bounds), "+Inf"], counts, strict=True):
        running += count
        cumulative.append((bound, float(running)))
    return cumulative, sum(p.total for p in parts)
