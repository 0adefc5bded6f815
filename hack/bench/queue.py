#!/usr/bin/env python3
"""Benchmark of the capsule (the queue) on a real PostgreSQL.

Uses FERRYMAN_DATABASE_URL's server, or starts an embedded one (fsync on). Each scenario gets a
fresh database. Prints a table, then as its LAST line one JSON object with enqueue_per_s,
bulk_enqueue_per_s, drain_per_s_1, drain_per_s_4, wake_p50_ms, wake_p95_ms, wake_p99_ms and
batch_overhead_pct (10,000 no-op jobs in one batch vs not, drained by 4 threads, same run), and
metrics_overhead_pct (the same drain with the worker's Prometheus metrics recording and scraped
every second vs off, in alternating rounds: the median drain time's difference;
metrics_overhead_cpu_pct: of this process's CPU per job) with the load average beside them.

    .venv/bin/python hack/bench/queue.py [--jobs 10000] [--rounds 3] [--metrics-rounds 6]
    .venv/bin/python hack/bench/queue.py --metrics-only   # just the metrics overhead
"""

from __future__ import annotations

import sys

# This file is named queue.py: keep its folder off sys.path, or it shadows the standard library's
# queue module (run it with `python -P` to the same effect).
if sys.path and sys.path[0] == __import__("os").path.dirname(__file__):
    sys.path.pop(0)

import argparse
import json
import os
import statistics
import threading
import time

from ferryman_worker import metrics
from ferryman_worker.db import connect, databases
from ferryman_worker.queue import Registry, batch, enqueue, enqueue_many, job
from ferryman_worker.queue.worker import Worker
from ferryman_worker.settings import Settings

registry = Registry()
started_at: dict[int, float] = {}


@job("bench.noop", registry=registry)
def noop() -> None:
    """Nothing: the queue's own cost."""


@job("bench.stamp", registry=registry)
def stamp(key: int) -> None:
    started_at[key] = time.perf_counter()


@job("bench.done", registry=registry)
def done(batch: dict[str, object]) -> None:
    """The batch callback."""


def worker(url: str, lanes: str) -> Worker:
    return Worker(Settings(lanes=lanes, poll_interval=1.0), url, registry=registry)


def bench_enqueue(dbs: databases.Scratchpad, jobs: int) -> float:
    with dbs.fresh() as url, connect.connect(url) as conn:
        began = time.perf_counter()
        for _ in range(jobs):
            enqueue(noop, conn=conn)
        return jobs / (time.perf_counter() - began)


def bench_bulk(dbs: databases.Scratchpad, jobs: int, chunk: int = 5000) -> float:
    with dbs.fresh() as url, connect.connect(url) as conn:
        calls = [noop.call() for _ in range(chunk)]
        began = time.perf_counter()
        for _ in range(jobs // chunk):
            enqueue_many(calls, conn=conn)
        return (jobs // chunk) * chunk / (time.perf_counter() - began)


def drain(url: str, lanes: str, expected: int) -> float:
    """Seconds for a fresh worker to finish every ready job of the database."""
    w = worker(url, lanes)
    with connect.connect(url) as conn:
        began = time.perf_counter()
        w.start()
        while True:
            row = conn.execute(
                "SELECT count(*) AS n FROM ferryman_jobs WHERE status = 'succeeded'"
            ).fetchone()
            if row and row["n"] >= expected:
                break
            time.sleep(0.01)
        elapsed = time.perf_counter() - began
    w.stop(grace=5)
    return elapsed


def bench_drain(dbs: databases.Scratchpad, jobs: int, width: int) -> float:
    with dbs.fresh() as url:
        with connect.connect(url) as conn:
            enqueue_many([noop.call() for _ in range(jobs)], conn=conn)
            conn.execute("VACUUM ANALYZE ferryman_jobs")
        return jobs / drain(url, f"default:{width}", jobs)


def bench_batch(dbs: databases.Scratchpad, jobs: int, batched: bool) -> float:
    with dbs.fresh() as url:
        with connect.connect(url) as conn:
            calls = [noop.call() for _ in range(jobs)]
            if batched:
                with batch(conn=conn, on_finish=done.call()):
                    enqueue_many(calls, conn=conn)
            else:
                enqueue_many(calls, conn=conn)
            conn.execute("VACUUM ANALYZE ferryman_jobs")
        expected = jobs + (1 if batched else 0)
        return drain(url, "default:4", expected)


def bench_wake(dbs: databases.Scratchpad, count: int = 200, spacing: float = 0.02) -> list[float]:
    started_at.clear()
    latencies = []
    with dbs.fresh() as url, connect.connect(url) as conn:
        w = worker(url, "default:4")
        w.start()
        time.sleep(0.5)
        committed: dict[int, float] = {}
        for key in range(count):
            enqueue(stamp, key, conn=conn)
            committed[key] = time.perf_counter()
            time.sleep(spacing)
        deadline = time.monotonic() + 10
        while len(started_at) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        w.stop(grace=5)
        for key, at in committed.items():
            latencies.append(max(0.0, started_at[key] - at) * 1000)
    return latencies


def bench_metrics(dbs: databases.Scratchpad, jobs: int, rounds: int) -> dict[str, float]:
    """Drain ``jobs`` no-op jobs on a lane of 4 with metrics off and on, alternating which goes
    first each round (drift on a busy machine hits both alike); medians of the rounds."""
    seconds: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for round_no in range(rounds):
        for on in (False, True) if round_no % 2 == 0 else (True, False):
            elapsed, cpu_per_job = _metrics_round(dbs, jobs, on)
            seconds[on].append(elapsed)
            cpu[on].append(cpu_per_job)
    off_s, on_s = statistics.median(seconds[False]), statistics.median(seconds[True])
    off_cpu, on_cpu = statistics.median(cpu[False]), statistics.median(cpu[True])
    return {
        "metrics_off_drain_s": off_s,
        "metrics_on_drain_s": on_s,
        "metrics_overhead_pct": (on_s - off_s) / off_s * 100,
        "metrics_overhead_cpu_pct": (on_cpu - off_cpu) / off_cpu * 100,
        "load_avg_1m": os.getloadavg()[0],
    }


def _metrics_round(dbs: databases.Scratchpad, jobs: int, on: bool) -> tuple[float, float]:
    """One drain: its seconds and this process's CPU seconds per job."""
    with dbs.fresh() as url:
        with connect.connect(url) as conn:
            enqueue_many([noop.call() for _ in range(jobs)], conn=conn)
            conn.execute("VACUUM ANALYZE ferryman_jobs")
        stop = threading.Event()
        scraper = threading.Thread(target=_scrape_every_second, args=(stop,), daemon=True)
        (metrics.enable if on else metrics.disable)()
        if on:
            scraper.start()
        cpu0 = time.process_time()
        try:
            elapsed = drain(url, "default:4", jobs)
        finally:
            cpu1 = time.process_time()
            stop.set()
            metrics.disable()
        if on:
            scraper.join()
    return elapsed, (cpu1 - cpu0) / jobs


def _scrape_every_second(stop: threading.Event) -> None:
    """What Prometheus does to a worker, more often than it would."""
    while not stop.wait(1.0):
        metrics.exposition()


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3, help="batch-overhead rounds (median)")
    parser.add_argument(
        "--metrics-rounds", type=int, default=6, help="metrics-overhead rounds (median)"
    )
    parser.add_argument(
        "--metrics-only", action="store_true", help="measure the metrics overhead alone"
    )
    args = parser.parse_args()
    with databases.server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url:
        dbs = databases.Scratchpad(admin_url, "ferryman_bench")
        if args.metrics_only:
            results = bench_metrics(dbs, args.jobs, args.metrics_rounds)
            report_metrics(results)
            print(json.dumps({key: round(value, 2) for key, value in results.items()}))
            return
        results = run(dbs, args.jobs, args.rounds)
        results |= bench_metrics(dbs, args.jobs, args.metrics_rounds)
    report(results)


def run(dbs: databases.Scratchpad, jobs: int, rounds: int) -> dict[str, float]:
    results: dict[str, float] = {}
    results["enqueue_per_s"] = bench_enqueue(dbs, 2000)
    results["bulk_enqueue_per_s"] = bench_bulk(dbs, 50_000)
    results["drain_per_s_1"] = bench_drain(dbs, jobs, 1)
    results["drain_per_s_4"] = bench_drain(dbs, jobs, 4)
    wake = bench_wake(dbs)
    results["wake_p50_ms"] = percentile(wake, 50)
    results["wake_p95_ms"] = percentile(wake, 95)
    results["wake_p99_ms"] = percentile(wake, 99)
    plain, batched = [], []
    for _ in range(rounds):  # alternate, so drift on the machine hits both alike
        plain.append(bench_batch(dbs, jobs, batched=False))
        batched.append(bench_batch(dbs, jobs, batched=True))
    results["plain_drain_s"] = statistics.median(plain)
    results["batched_drain_s"] = statistics.median(batched)
    results["batch_overhead_pct"] = (
        (results["batched_drain_s"] - results["plain_drain_s"]) / results["plain_drain_s"] * 100
    )
    return results


def report(results: dict[str, float]) -> None:
    rows = [
        ("enqueue, one by one (autocommit)", f"{results['enqueue_per_s']:,.0f} jobs/s"),
        ("enqueue, bulk (5,000 per statement)", f"{results['bulk_enqueue_per_s']:,.0f} jobs/s"),
        ("drain 10,000 no-op jobs, lane of 1", f"{results['drain_per_s_1']:,.0f} jobs/s"),
        ("drain 10,000 no-op jobs, lane of 4", f"{results['drain_per_s_4']:,.0f} jobs/s"),
        (
            "  ratio lane of 4 / lane of 1",
            f"{results['drain_per_s_4'] / results['drain_per_s_1']:.2f}",
        ),
        (
            "wake-up p50 / p95 / p99",
            f"{results['wake_p50_ms']:.2f} / {results['wake_p95_ms']:.2f}"
            f" / {results['wake_p99_ms']:.2f} ms",
        ),
        (
            "drain 10,000, plain vs in one batch",
            f"{results['plain_drain_s']:.2f} s vs {results['batched_drain_s']:.2f} s",
        ),
        ("  batch overhead", f"{results['batch_overhead_pct']:+.1f} %"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    report_metrics(results)
    keys = [
        "enqueue_per_s",
        "bulk_enqueue_per_s",
        "drain_per_s_1",
        "drain_per_s_4",
        "wake_p50_ms",
        "wake_p95_ms",
        "wake_p99_ms",
        "batch_overhead_pct",
        "metrics_overhead_pct",
        "metrics_overhead_cpu_pct",
        "load_avg_1m",
    ]
    print(json.dumps({key: round(results[key], 2) for key in keys}))


def report_metrics(results: dict[str, float]) -> None:
    print(
        f"drain 10,000, metrics off vs on: {results['metrics_off_drain_s']:.2f} s vs"
        f" {results['metrics_on_drain_s']:.2f} s: {results['metrics_overhead_pct']:+.1f} %"
        f" (CPU per job {results['metrics_overhead_cpu_pct']:+.1f} %;"
        f" load average {results['load_avg_1m']:.2f})"
    )


if __name__ == "__main__":
    main()
