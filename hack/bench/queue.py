#!/usr/bin/env python3
"""Benchmark of the capsule (the queue) on a real PostgreSQL.

Uses FERRYMAN_DATABASE_URL's server, or starts an embedded one (fsync on). Each scenario gets a
fresh database. Prints a table, then as its LAST line one JSON object with enqueue_per_s,
bulk_enqueue_per_s, drain_per_s_1, drain_per_s_4, wake_p50_ms, wake_p95_ms, wake_p99_ms and
batch_overhead_pct (10,000 no-op jobs in one batch vs not, drained by a lane of 1, in alternating
rounds: the median of the rounds' CPU per job, the worker's and its database sessions', with its
standard error and the rounds' range beside it; batch_overhead_db_pct: the sessions' alone),
claims_per_job_16_threads (single jobs at 300/s on a lane of 16 threads: ferryman_claim calls
per job), and metrics_overhead_pct (10,000 no-op jobs drained by a lane of 4 with the worker's
Prometheus metrics recording, and scraped every 5 s (each scrape past the queue depths' cache, so
each reads the database; Prometheus scrapes every 15 to 60 s), vs off, in alternating rounds: the
median of the rounds' differences in CPU per job, the worker's and its database sessions', as
for the batch overhead; metrics_overhead_wall_pct: of the drain time; load_avg_1m beside them).

With --scale it measures claims at fleet scale instead: slow jobs (--job-seconds, 0.2 s sleeps)
on N `ferryman worker` processes x T threads, 16, 64 and 256 of them running at once, on a server
whose max_connections it raises (its own embedded one; an external one must allow enough). For
each: jobs/s against the ideal (running / job time), PostgreSQL CPU per job (its processes' CPU
from /proc, so only for a local server), claims and index entries read per job. Last line: JSON
with scale_efficiency_<n>, pg_cpu_us_per_job_<n>, claims_per_job_<n>, index_reads_per_claim_<n>
and claim_cost_ratio_256_vs_16.

    .venv/bin/python -P hack/bench/queue.py [--jobs 10000] [--rounds 6]
    .venv/bin/python -P hack/bench/queue.py --metrics-only [--rounds 8]
    .venv/bin/python -P hack/bench/queue.py --scale [--rounds 1] [--seconds 10] [--job-seconds 0.2]
"""

from __future__ import annotations

import sys

# This file is named queue.py: keep its folder off sys.path, or it shadows the standard library's
# queue module (run it with `python -P` to the same effect).
if sys.path and sys.path[0] == __import__("os").path.dirname(__file__):
    sys.path.pop(0)

import argparse
import contextlib
import dataclasses
import json
import os
import pathlib
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import LiteralString

from psycopg import sql

from ferryman_worker import metrics
from ferryman_worker.db import connect, databases
from ferryman_worker.queue import JobCall, JobOptions, Registry, batch, enqueue, enqueue_many, job
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


@dataclasses.dataclass(frozen=True)
class Drain:
    seconds: float
    db_cpu_per_job: float | None
    """CPU seconds per job of the worker's database sessions (None: the server is not local)."""
    own_cpu_per_job: float
    """CPU seconds per job of this process (the worker's threads, and this loop's polls)."""


def backends_cpu_seconds(conn: connect.Connection) -> float | None:
    """CPU seconds so far of the other client sessions of ``conn``'s database (the worker's
    pool): autovacuum, checkpoints and other databases are left out. None if not local."""
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
    ).fetchall()
    try:
        fields = [_proc_stat(int(row["pid"])) for row in rows]
    except (FileNotFoundError, ProcessLookupError):
        return None
    return sum(int(f[11]) + int(f[12]) for f in fields) / os.sysconf("SC_CLK_TCK")


def drain(url: str, lanes: str, expected: int, poll: float = 0.01) -> Drain:
    """How long (and how much CPU per job) a fresh worker takes to finish every ready job; CPU
    is counted from when the worker has started."""
    w = worker(url, lanes)
    with connect.connect(url) as conn:
        began = time.perf_counter()
        w.start()
        done0, pg0, own0 = (
            count_rows(conn, SUCCEEDED),
            backends_cpu_seconds(conn),
            time.process_time(),
        )
        while count_rows(conn, SUCCEEDED) < expected:
            time.sleep(poll)
        elapsed = time.perf_counter() - began
        pg1, own1 = backends_cpu_seconds(conn), time.process_time()
    w.stop(grace=5)
    jobs = max(expected - done0, 1)
    db = None if pg0 is None or pg1 is None else (pg1 - pg0) / jobs
    return Drain(elapsed, db, (own1 - own0) / jobs)


def bench_drain(dbs: databases.Scratchpad, jobs: int, width: int) -> float:
    with dbs.fresh() as url:
        with connect.connect(url) as conn:
            enqueue_many([noop.call() for _ in range(jobs)], conn=conn)
            conn.execute("VACUUM ANALYZE ferryman_jobs")
        return jobs / drain(url, f"default:{width}", jobs).seconds


def bench_batch(dbs: databases.Scratchpad, jobs: int, batched: bool) -> Drain:
    with dbs.fresh() as url:
        with connect.connect(url) as conn:
            calls = [noop.call() for _ in range(jobs)]
            if batched:
                with batch(conn=conn, on_finish=done.call()):
                    enqueue_many(calls, conn=conn)
            else:
                enqueue_many(calls, conn=conn)
            conn.execute("VACUUM ANALYZE ferryman_jobs")
            conn.execute("ALTER TABLE ferryman_jobs SET (autovacuum_enabled = false)")
        expected = jobs + (1 if batched else 0)
        return drain(url, "default:1", expected, poll=0.05)


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


def bench_herd(
    dbs: databases.Scratchpad, threads: int, rate: float = 300.0, count: int = 900
) -> float:
    """Claims per job when single jobs arrive at ``rate`` per second on a lane of ``threads``:
    1.0 when each notification wakes one thread per new job, up to ``threads`` when it wakes all."""
    with dbs.fresh() as url, connect.connect(url) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET track_functions = 'pl'").format(
                sql.Identifier(conn.info.dbname)
            )
        )
        w = worker(url, f"default:{threads}")
        w.start()
        time.sleep(0.5)
        began = time.perf_counter()
        for n in range(count):
            enqueue(noop, conn=conn)
            time.sleep(max(0.0, began + (n + 1) / rate - time.perf_counter()))
        wait_until(lambda: count_rows(conn, SUCCEEDED) >= count, 30, "the herd's jobs")
        w.stop(grace=5)  # its sessions end, and report their function calls
        time.sleep(0.5)
        return count_rows(conn, CLAIM_CALLS) / count


def bench_metrics(dbs: databases.Scratchpad, jobs: int, rounds: int) -> dict[str, float]:
    """Drain ``jobs`` no-op jobs on a lane of 4 with metrics off and on, alternating which goes
    first each round (drift on a busy machine hits both alike); medians of the rounds' pairs."""
    off: list[Drain] = []
    on: list[Drain] = []
    for round_no in range(rounds):
        for recording in (False, True) if round_no % 2 == 0 else (True, False):
            (on if recording else off).append(_metrics_round(dbs, jobs, recording))

    def cpu(d: Drain) -> float:
        return (d.db_cpu_per_job or 0.0) + d.own_cpu_per_job

    pairs = list(zip(off, on, strict=True))
    return {
        "metrics_off_drain_s": statistics.median(d.seconds for d in off),
        "metrics_on_drain_s": statistics.median(d.seconds for d in on),
        # CPU per job, as the batch overhead: a busy machine stretches wall time far more than
        # the work done; the wall time's difference is beside it
        "metrics_overhead_pct": statistics.median(
            (cpu(b) - cpu(a)) / cpu(a) * 100 for a, b in pairs
        ),
        "metrics_overhead_wall_pct": statistics.median(
            (b.seconds - a.seconds) / a.seconds * 100 for a, b in pairs
        ),
        "load_avg_1m": os.getloadavg()[0],
    }


def _metrics_round(dbs: databases.Scratchpad, jobs: int, recording: bool) -> Drain:
    with dbs.fresh() as url:
        with connect.connect(url) as conn:
            enqueue_many([noop.call() for _ in range(jobs)], conn=conn)
            conn.execute("VACUUM ANALYZE ferryman_jobs")
        stop = threading.Event()
        scraper = threading.Thread(target=_scrape, args=(stop,), daemon=True)
        (metrics.enable if recording else metrics.disable)()
        if recording:
            scraper.start()
        try:
            return drain(url, "default:4", jobs)
        finally:
            stop.set()
            metrics.disable()
            if recording:
                scraper.join()


def _scrape(stop: threading.Event) -> None:
    """What Prometheus does to a worker, more often than it would (every 5 s: each scrape is
    past the queue depths' cache and reads the database)."""
    metrics.exposition()
    while not stop.wait(5.0):
        metrics.exposition()


def report_metrics(results: dict[str, float]) -> None:
    print(
        f"drain 10,000, lane of 4, metrics off vs on: {results['metrics_off_drain_s']:.2f} s vs"
        f" {results['metrics_on_drain_s']:.2f} s ({results['metrics_overhead_wall_pct']:+.1f} %);"
        f" CPU per job (worker and its sessions) {results['metrics_overhead_pct']:+.1f} %;"
        f" load average {results['load_avg_1m']:.2f}"
    )


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


# -- fleet scale ------------------------------------------------------------------------------

BENCH_JOBS = pathlib.Path(__file__).resolve().parent / "jobs"
SCALE_LEVELS = ((16, 2), (64, 4), (256, 8))
"""(jobs running at once, worker processes): threads per process = running / processes."""
SCALE_MAX_CONNECTIONS = 600


@contextlib.contextmanager
def scale_server(url: str | None) -> Iterator[str]:
    """The admin URL of a server that allows the largest level's connections."""
    if url:
        with connect.connect(url) as conn:
            row = conn.execute("SHOW max_connections").fetchone()
        assert row is not None
        needed = SCALE_LEVELS[-1][0] + 4 * SCALE_LEVELS[-1][1] + 10
        if int(row["max_connections"]) < needed:
            raise SystemExit(
                f"--scale needs max_connections >= {needed} on FERRYMAN_DATABASE_URL's server "
                f"(it has {row['max_connections']}); raise it, or unset the variable to let the "
                "benchmark start its own server"
            )
        yield url
        return
    from ferryman_worker.db import embedded

    server = embedded.start(tempfile.mkdtemp(prefix="ferryman-bench-pg-"), cleanup="delete")
    try:
        with connect.connect(server.url()) as conn:
            conn.execute(f"ALTER SYSTEM SET max_connections = {SCALE_MAX_CONNECTIONS}")
        server.restart()
        yield server.url()
    finally:
        server.stop()


def _proc_stat(pid: int) -> list[str]:
    text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()  # fields from the 3rd (state) on


def pg_cpu_seconds(conn: connect.Connection) -> float | None:
    """CPU seconds used so far by the server: the postmaster, its live children, and its
    children that exited. None when the server is not on this machine."""
    row = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()
    assert row is not None
    try:
        postmaster = int(_proc_stat(int(row["pid"]))[1])
        fields = _proc_stat(postmaster)
    except (FileNotFoundError, ValueError):
        return None
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            child = _proc_stat(int(entry.name))
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        if int(child[1]) == postmaster:
            ticks += int(child[11]) + int(child[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def procs_cpu_seconds(procs: list[subprocess.Popen[bytes]]) -> float:
    """CPU seconds used so far by these worker processes (all their threads)."""
    fields = [_proc_stat(proc.pid) for proc in procs]
    return sum(int(f[11]) + int(f[12]) for f in fields) / os.sysconf("SC_CLK_TCK")


def start_workers(url: str, processes: int, threads: int) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "FERRYMAN_DATABASE_URL": url,
        "FERRYMAN_IMPORTS": "ferryman_benchjobs",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(BENCH_JOBS), os.environ.get("PYTHONPATH")])
        ),
    }
    command = [sys.executable, "-m", "ferryman_worker.cli", "--log-level", "WARNING", "worker"]
    command += ["--lanes", f"default:{threads}", "--poll-interval", "5"]
    return [subprocess.Popen(command, env=env) for _ in range(processes)]


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def count_rows(conn: connect.Connection, query: LiteralString) -> int:
    row = conn.execute(query).fetchone()
    assert row is not None
    return int(next(iter(row.values())) or 0)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


RUNNING = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
SUCCEEDED = "SELECT count(*) FROM ferryman_jobs WHERE status = 'succeeded'"
CLAIM_CALLS = (
    "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'ferryman_claim'"
)
INDEX_READS = (
    "SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes"
    " WHERE indexrelname = 'ferryman_jobs_ready'"
)


def scale_level(
    dbs: databases.Scratchpad, running: int, processes: int, job_s: float, seconds: float
) -> dict[str, float]:
    """One level: ``running`` sleeping jobs at once on ``processes`` worker processes."""
    warmup = 3 * job_s + 1.0
    total = int(running * (warmup + seconds + 2) / job_s * 1.2) + running
    with dbs.fresh() as url, connect.connect(url) as conn:
        dbname = conn.info.dbname
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET track_functions = 'pl'").format(sql.Identifier(dbname))
        )
        procs = start_workers(url, processes, running // processes)
        try:
            wait_until(
                lambda: count_rows(conn, "SELECT count(*) FROM ferryman_workers") == processes,
                120,
                f"{processes} worker processes to start",
            )
            time.sleep(1.0)  # every lane thread waits on its lane
            call = JobCall("bench.sleep", (job_s,), {}, JobOptions())
            enqueue_many([call] * total, conn=conn)
            time.sleep(warmup)
            done0, cpu0, t0 = count_rows(conn, SUCCEEDED), pg_cpu_seconds(conn), time.perf_counter()
            workers0 = procs_cpu_seconds(procs)
            samples = []
            while time.perf_counter() - t0 < seconds:
                samples.append(count_rows(conn, RUNNING))
                time.sleep(0.25)
            done1, cpu1, t1 = count_rows(conn, SUCCEEDED), pg_cpu_seconds(conn), time.perf_counter()
            workers1 = procs_cpu_seconds(procs)
            if done1 >= total:
                raise SystemExit(f"level {running}: the queue ran dry; enqueue more jobs")
        finally:
            stop_workers(procs)
        time.sleep(0.5)
        claims, reads, done = (
            count_rows(conn, CLAIM_CALLS),
            count_rows(conn, INDEX_READS),
            count_rows(conn, SUCCEEDED),
        )
    jobs_per_s = (done1 - done0) / (t1 - t0)
    result = {
        "running": running,
        "processes": processes,
        "mean_running": statistics.mean(samples),
        "jobs_per_s": jobs_per_s,
        "ideal_per_s": running / job_s,
        "efficiency": jobs_per_s / (running / job_s),
        "claims_per_job": claims / max(done, 1),
        "index_reads_per_claim": reads / max(claims, 1),
        "worker_cpu_us_per_job": (workers1 - workers0) / max(done1 - done0, 1) * 1e6,
    }
    if cpu0 is not None and cpu1 is not None:
        result["pg_cpu_us_per_job"] = (cpu1 - cpu0) / max(done1 - done0, 1) * 1e6
    return result


def run_scale(admin_url: str, rounds: int, job_s: float, seconds: float) -> dict[str, float]:
    dbs = databases.Scratchpad(admin_url, "ferryman_bench")
    per_level: dict[int, list[dict[str, float]]] = {running: [] for running, _ in SCALE_LEVELS}
    for round_no in range(rounds):  # levels alternate within each round: drift hits each alike
        for running, processes in SCALE_LEVELS if round_no % 2 == 0 else SCALE_LEVELS[::-1]:
            level = scale_level(dbs, running, processes, job_s, seconds)
            per_level[running].append(level)
            print(f"round {round_no + 1}: {json.dumps({k: round(v, 3) for k, v in level.items()})}")
    results: dict[str, float] = {}
    for running, levels in per_level.items():
        for key in levels[0]:
            if key not in ("running", "processes"):
                results[f"{key}_{running}"] = statistics.median(level[key] for level in levels)
    if "pg_cpu_us_per_job_16" in results:
        results["claim_cost_ratio_256_vs_16"] = (
            results["pg_cpu_us_per_job_256"] / results["pg_cpu_us_per_job_16"]
        )
    results["scale_efficiency_256"] = results["efficiency_256"]
    return results


def report_scale(results: dict[str, float], job_s: float, load: tuple[float, float]) -> None:
    print(
        f"{job_s * 1000:.0f} ms sleep jobs; load average {load[0]:.2f} before, {load[1]:.2f} after"
    )
    header = "running  processes x threads  jobs/s (ideal)   efficiency  mean running"
    print(header + "  PG CPU/job  worker CPU/job  claims/job  index reads/claim")
    for running, processes in SCALE_LEVELS:
        cpu = results.get(f"pg_cpu_us_per_job_{running}")
        print(
            f"{running:>7}  {processes:>9} x {running // processes:<7}"
            f"  {results[f'jobs_per_s_{running}']:>6.0f} ({running / job_s:>5.0f})"
            f"  {results[f'efficiency_{running}']:>10.3f}"
            f"  {results[f'mean_running_{running}']:>12.1f}"
            f"  {'-' if cpu is None else f'{cpu:.0f} us':>10}"
            f"  {results[f'worker_cpu_us_per_job_{running}']:>11.0f} us"
            f"  {results[f'claims_per_job_{running}']:>10.2f}"
            f"  {results[f'index_reads_per_claim_{running}']:>17.2f}"
        )
    if "claim_cost_ratio_256_vs_16" in results:
        print(
            "PostgreSQL CPU per job, 256 vs 16 running: "
            f"{results['claim_cost_ratio_256_vs_16']:.2f}"
        )
    keys = [k for k in results if not k.startswith(("jobs_per_s", "ideal_per_s", "mean_running"))]
    print(
        json.dumps({key: round(results[key], 3) for key in sorted(keys)} | {"load_avg_1m": load[1]})
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument(
        "--rounds", type=int, help="alternating rounds, median taken (default 6; --scale: 1)"
    )
    parser.add_argument("--scale", action="store_true", help="claims at 16/64/256 running jobs")
    parser.add_argument("--job-seconds", type=float, default=0.2, help="--scale: job length")
    parser.add_argument("--seconds", type=float, default=10.0, help="--scale: measured seconds")
    parser.add_argument(
        "--metrics-only", action="store_true", help="only the metrics overhead (default 8 rounds)"
    )
    args = parser.parse_args()
    if args.metrics_only:
        with databases.server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url:
            dbs = databases.Scratchpad(admin_url, "ferryman_bench")
            results = bench_metrics(dbs, args.jobs, args.rounds or 8)
        report_metrics(results)
        print(json.dumps({key: round(value, 2) for key, value in results.items()}))
        return
    if args.scale:
        before = os.getloadavg()[0]
        with scale_server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url:
            results = run_scale(admin_url, args.rounds or 1, args.job_seconds, args.seconds)
        report_scale(results, args.job_seconds, (before, os.getloadavg()[0]))
        return
    with databases.server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url:
        dbs = databases.Scratchpad(admin_url, "ferryman_bench")
        results = run(dbs, args.jobs, args.rounds or 6)
        results |= bench_metrics(dbs, args.jobs, args.rounds or 6)
    report(results)


def run(dbs: databases.Scratchpad, jobs: int, batch_rounds: int) -> dict[str, float]:
    results: dict[str, float] = {}
    results["enqueue_per_s"] = bench_enqueue(dbs, 2000)
    results["bulk_enqueue_per_s"] = bench_bulk(dbs, 50_000)
    results["drain_per_s_1"] = bench_drain(dbs, jobs, 1)
    results["drain_per_s_4"] = bench_drain(dbs, jobs, 4)
    wake = bench_wake(dbs)
    results["wake_p50_ms"] = percentile(wake, 50)
    results["wake_p95_ms"] = percentile(wake, 95)
    results["wake_p99_ms"] = percentile(wake, 99)
    results["claims_per_job_16_threads"] = bench_herd(dbs, 16)
    plain: list[Drain] = []
    batched: list[Drain] = []
    for round_no in range(batch_rounds):  # alternate the order: drift hits both alike
        for is_batched in (False, True) if round_no % 2 == 0 else (True, False):
            (batched if is_batched else plain).append(bench_batch(dbs, jobs, is_batched))
    results["plain_drain_s"] = statistics.median(d.seconds for d in plain)
    results["batched_drain_s"] = statistics.median(d.seconds for d in batched)
    # Round by round, batched against plain, in CPU per job (a busy machine stretches wall time
    # far more than the work done): the database sessions' and the worker's, on a lane of one
    # thread (more threads add the GIL's contention to the worker's CPU).
    by_cpu = all(d.db_cpu_per_job for d in plain + batched)

    def cost(d: Drain, db_only: bool = False) -> float:
        if not by_cpu:
            return d.seconds
        return (d.db_cpu_per_job or 0.0) + (0.0 if db_only else d.own_cpu_per_job)

    for key, db_only in (("batch_overhead", False), ("batch_overhead_db", True)):
        overheads = [
            (cost(b, db_only) - cost(p, db_only)) / cost(p, db_only) * 100
            for p, b in zip(plain, batched, strict=True)
        ]
        results[f"{key}_pct"] = statistics.median(overheads)
        results[f"{key}_range_pct"] = max(overheads) - min(overheads)
        results[f"{key}_stderr_pct"] = statistics.stdev(overheads) / len(overheads) ** 0.5
    results["batch_overhead_by_cpu"] = float(by_cpu)
    results["plain_cpu_us_per_job"] = statistics.median(cost(d) for d in plain) * 1e6
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
            "drain 10,000 on a lane of 1, plain vs in one batch",
            f"{results['plain_drain_s']:.2f} s vs {results['batched_drain_s']:.2f} s"
            + (
                f"; {results['plain_cpu_us_per_job']:.0f} us CPU per plain job"
                if results["batch_overhead_by_cpu"]
                else ""
            ),
        ),
        (
            "  batch overhead ("
            + ("CPU per job" if results["batch_overhead_by_cpu"] else "wall time")
            + ", median of the rounds)",
            f"{results['batch_overhead_pct']:+.1f} % ± {results['batch_overhead_stderr_pct']:.1f}"
            f" (standard error; rounds within {results['batch_overhead_range_pct']:.1f} points)",
        ),
        (
            "  of which in the database",
            f"{results['batch_overhead_db_pct']:+.1f} %"
            f" ± {results['batch_overhead_db_stderr_pct']:.1f}"
            f" (rounds within {results['batch_overhead_db_range_pct']:.1f} points)",
        ),
        (
            "claims per job, 300 single jobs/s, lane of 16",
            f"{results['claims_per_job_16_threads']:.2f}",
        ),
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
        "batch_overhead_stderr_pct",
        "batch_overhead_range_pct",
        "batch_overhead_db_pct",
        "batch_overhead_db_stderr_pct",
        "claims_per_job_16_threads",
        "metrics_overhead_pct",
        "metrics_overhead_wall_pct",
        "load_avg_1m",
    ]
    print(json.dumps({key: round(results[key], 2) for key in keys}))


if __name__ == "__main__":
    main()
