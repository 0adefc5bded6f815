#!/usr/bin/env python3
"""Benchmark of the capsule (the queue) on a real PostgreSQL.

Uses FERRYMAN_DATABASE_URL's server, or starts an embedded one (fsync on). Each scenario gets a
fresh database. Prints a table, then as its LAST line one JSON object with enqueue_per_s,
bulk_enqueue_per_s, drain_per_s_1, drain_per_s_4, wake_p50_ms, wake_p95_ms, wake_p99_ms,
claims_per_job_16_threads (single jobs at 300/s on a lane of 16 threads: ferryman_claim calls
per job), the overheads and load_avg_1m.

The overheads are measured side by side: each round starts two `ferryman worker` processes at once,
one per variant, each with its own database of --overhead-jobs no-op jobs, and measures both over
the same window (from when each has finished a tenth of its jobs to when the first has finished
nine tenths): CPU per job of the worker process and of its database sessions (from /proc, so the
server must be local; else the worker's alone). Whatever the machine does meanwhile, it does to
both. Consecutive rounds start the two sides in opposite orders; the mean of each pair of rounds
cancels what starting first does, and the median of the pairs is reported with its standard error
and range (and the single rounds' range), --overhead-jobs jobs per side (30,000):
- batch_overhead_pct: the jobs in one batch vs none, lanes of 4 (_db_pct: the sessions alone);
- metrics_overhead_pct: metrics recorded, served and scraped every second (Prometheus scrapes
  every 15 to 60 s; each scrape here is past the queue depths' cache and reads the database) vs
  off, lanes of 4;
- same_overhead_pct: plain vs plain, lanes of 4: the method's own bias, near 0.
Each with _stderr_pct, _range_pct (over the pairs), _round_range_pct, _wall_pct (wall time per
job) and the load average range.

With --scale it measures claims at fleet scale instead: slow jobs (--job-seconds, 0.2 s sleeps)
on N `ferryman worker` processes x T threads, 16, 64 and 256 of them running at once, on a server
whose max_connections it raises (its own embedded one; an external one must allow enough). For
each: jobs/s against the ideal (running / job time), PostgreSQL CPU per job (its processes' CPU
from /proc, so only for a local server), claims and index entries read per job. Last line: JSON
with scale_efficiency_<n>, pg_cpu_us_per_job_<n>, claims_per_job_<n>, index_reads_per_claim_<n>
and claim_cost_ratio_256_vs_16.

    .venv/bin/python -P hack/bench/queue.py [--jobs 10000] [--rounds 8]
    .venv/bin/python -P hack/bench/queue.py --batch-only | --metrics-only | --overheads-only
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
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import LiteralString

from psycopg import sql

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


def drain(url: str, lanes: str, expected: int, poll: float = 0.01) -> float:
    """Seconds a fresh in-process worker takes to finish every ready job."""
    w = worker(url, lanes)
    with connect.connect(url) as conn:
        began = time.perf_counter()
        w.start()
        while count_rows(conn, SUCCEEDED) < expected:
            time.sleep(poll)
        elapsed = time.perf_counter() - began
    w.stop(grace=5)
    return elapsed


def bench_drain(dbs: databases.Scratchpad, jobs: int, width: int) -> float:
    with dbs.fresh() as url:
        with connect.connect(url) as conn:
            enqueue_many([noop.call() for _ in range(jobs)], conn=conn)
            conn.execute("VACUUM ANALYZE ferryman_jobs")
        return jobs / drain(url, f"default:{width}", jobs)


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


def start_workers(
    url: str, processes: int, threads: int, *, poll: float = 5.0, metrics_port: int = 0
) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "FERRYMAN_DATABASE_URL": url,
        "FERRYMAN_IMPORTS": "ferryman_benchjobs",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(BENCH_JOBS), os.environ.get("PYTHONPATH")])
        ),
    }
    command = [sys.executable, "-m", "ferryman_worker.cli", "--log-level", "WARNING", "worker"]
    command += ["--lanes", f"default:{threads}", "--poll-interval", str(poll)]
    command += ["--metrics-port", str(metrics_port)]
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

HELD = (
    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY h) AS p50,"
    " percentile_cont(0.99) WITHIN GROUP (ORDER BY h) AS p99"
    " FROM (SELECT extract(epoch FROM finished_at - claimed_at)::float8 AS h"
    " FROM ferryman_jobs WHERE status = 'succeeded') held"
)
"""How long a job held its claim, from its claim's statement to the one that wrote its
success (the next claim): the job's own time plus the worker's turnaround."""


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
        held = conn.execute(HELD).fetchone()
        assert held is not None
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
        "held_ms_p50": held["p50"] * 1000,
        "held_ms_p99": held["p99"] * 1000,
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


OVERHEADS = {
    "batch": ("batch_overhead", "batch overhead: one batch of them vs none, lane of 4"),
    "metrics": (
        "metrics_overhead",
        "metrics overhead: served and scraped every 1 s vs off, lane of 4",
    ),
    "same": ("same_overhead", "the method's own bias: plain vs plain, lane of 4 (near 0)"),
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="The overheads (batch, metrics, and the method's own bias) run two worker "
        "processes side by side on the same machine at once; see docs/benchmarks.md.",
    )
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain (default 10,000)")
    parser.add_argument(
        "--rounds",
        type=int,
        help="rounds of each overhead, median taken (default 8); --scale: rounds (default 1)",
    )
    parser.add_argument("--scale", action="store_true", help="claims at 16/64/256 running jobs")
    parser.add_argument("--job-seconds", type=float, default=0.2, help="--scale: job length")
    parser.add_argument("--seconds", type=float, default=10.0, help="--scale: measured seconds")
    parser.add_argument(
        "--overhead-jobs",
        type=int,
        default=30_000,
        help="jobs per side per round of the overheads (default 30,000)",
    )
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--batch-only", action="store_true", help="only the batch overhead")
    only.add_argument("--metrics-only", action="store_true", help="only the metrics overhead")
    only.add_argument(
        "--overheads-only",
        action="store_true",
        help="only the overheads: batch, metrics, and the method's own bias (plain vs plain)",
    )
    args = parser.parse_args()
    if args.scale:
        before = os.getloadavg()[0]
        with scale_server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url:
            scale = run_scale(admin_url, args.rounds or 1, args.job_seconds, args.seconds)
        report_scale(scale, args.job_seconds, (before, os.getloadavg()[0]))
        return
    if args.batch_only or args.metrics_only:
        which = ["batch"] if args.batch_only else ["metrics"]
    else:
        which = ["batch", "metrics", "same"]
    results: dict[str, float] = {}
    with databases.server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url:
        dbs = databases.Scratchpad(admin_url, "ferryman_bench")
        if not (args.batch_only or args.metrics_only or args.overheads_only):
            results = run(dbs, args.jobs)
        for what in which:
            results |= bench_overhead(dbs, args.overhead_jobs, args.rounds or 8, what)
    results["load_avg_1m"] = os.getloadavg()[0]
    report(results)


def run(dbs: databases.Scratchpad, jobs: int) -> dict[str, float]:
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
    return results


# -- overheads: two worker processes side by side -------------------------------------------------
#
# An overhead of a few per cent is smaller than what a shared machine does to CPU time from one
# minute to the next (caches, frequency, other processes), so the two variants never run one
# after the other: each round starts both at once, a `ferryman worker` process each with its own
# database, and measures both over the same window (from when each has finished a tenth of its
# jobs to when the first has finished nine tenths): CPU per job of the worker process and of its
# database sessions, from /proc. Whatever the machine does in that window, it does to both.
# Rounds alternate which one starts first; the median of the rounds' ratios is reported, with its
# standard error and the rounds' range.


@dataclasses.dataclass(frozen=True)
class Window:
    """One side of a round: jobs finished and CPU seconds spent within the common window."""

    jobs: int
    worker_s: float
    sessions_s: float | None
    """The worker's database sessions (None: the server is not on this machine)."""
    seconds: float

    def per_job(self, part: str = "all") -> float:
        own = 0.0 if part == "db" else self.worker_s
        db = 0.0 if part == "worker" or self.sessions_s is None else self.sessions_s
        return (own + db) / max(self.jobs, 1)


@dataclasses.dataclass
class _Side:
    conn: connect.Connection
    proc: subprocess.Popen[bytes]
    port: int = 0

    def snapshot(self) -> tuple[int, float, dict[int, float] | None, float]:
        done = count_rows(self.conn, SUCCEEDED)
        return done, procs_cpu_seconds([self.proc]), sessions_cpu(self.conn), time.perf_counter()


def sessions_cpu(conn: connect.Connection) -> dict[int, float] | None:
    """CPU seconds so far of each other client session of ``conn``'s database (a worker's pool
    and its listener), by backend pid; None if the server is not local."""
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
    ).fetchall()
    seconds: dict[int, float] = {}
    for row in rows:
        try:
            fields = _proc_stat(int(row["pid"]))
        except (FileNotFoundError, ProcessLookupError):
            if not pathlib.Path("/proc/1").exists():
                return None
            continue  # the session ended just now
        seconds[int(row["pid"])] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    if seconds and not pathlib.Path(f"/proc/{next(iter(seconds))}").exists():
        return None
    return seconds


def _window(
    before: tuple[int, float, dict[int, float] | None, float],
    after: tuple[int, float, dict[int, float] | None, float],
) -> Window:
    sessions = None
    if before[2] is not None and after[2] is not None:
        sessions = sum(cpu - before[2].get(pid, 0.0) for pid, cpu in after[2].items())
    return Window(after[0] - before[0], after[1] - before[1], sessions, after[3] - before[3])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def side_by_side(
    dbs: databases.Scratchpad,
    jobs: int,
    threads: int,
    prepare: Callable[[connect.Connection, int, str], None],
    *,
    b_metrics: bool = False,
    first: str = "a",
    scrape_every: float = 1.0,
) -> tuple[Window, Window]:
    """One round: sides a and b (``prepare(conn, jobs, side)`` fills each side's fresh
    database), drained at once by a worker process each with a lane of ``threads``; b serves
    /metrics (scraped every ``scrape_every`` s) if ``b_metrics``."""
    with contextlib.ExitStack() as stack:
        conns, urls = {}, {}
        for name in "ab":
            urls[name] = stack.enter_context(dbs.fresh())
            conns[name] = conn = stack.enter_context(connect.connect(urls[name]))
            prepare(conn, jobs, name)
            conn.execute("VACUUM ANALYZE")
            conn.execute("ALTER TABLE ferryman_jobs SET (autovacuum_enabled = false)")
        order = "ab" if first == "a" else "ba"
        sides: dict[str, _Side] = {}
        for name in order:
            port = free_port() if (name == "b" and b_metrics) else 0
            (proc,) = start_workers(urls[name], 1, threads, poll=1.0, metrics_port=port)
            sides[name] = _Side(conns[name], proc, port)
        stack.callback(stop_workers, [side.proc for side in sides.values()])
        stop = threading.Event()
        if b_metrics:
            scraper = threading.Thread(
                target=_scrape, args=(sides["b"].port, scrape_every, stop), daemon=True
            )
            scraper.start()
            stack.callback(scraper.join)
        stack.callback(stop.set)
        wait_until(
            lambda: all(count_rows(s.conn, SUCCEEDED) >= jobs // 10 for s in sides.values()),
            120,
            "both sides to finish a tenth of their jobs",
        )
        before = {name: sides[name].snapshot() for name in order}
        wait_until(
            lambda: any(count_rows(s.conn, SUCCEEDED) >= jobs * 9 // 10 for s in sides.values()),
            600,
            "a side to finish nine tenths of its jobs",
        )
        after = {name: sides[name].snapshot() for name in order}
    return _window(before["a"], after["a"]), _window(before["b"], after["b"])


def _scrape(port: int, every: float, stop: threading.Event) -> None:
    """What Prometheus does to a worker, far more often than it would (every 15 to 60 s): each
    scrape of ``every`` s or more apart is past the queue depths' cache and reads the database."""
    while not stop.wait(every):
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()


def overheads(
    pairs: list[tuple[Window, Window]], key: str, parts: tuple[str, ...] = ("all",)
) -> dict[str, float]:
    """b's cost per job over a's, in per cent: median, standard error and range over the pairs
    of consecutive rounds (one started a first, the other b: the mean of the two cancels what
    starting first does, which alone moved a round by about 5 points), and the single rounds'
    range. With an odd number of rounds, the rounds themselves."""
    results: dict[str, float] = {}
    for part in parts:
        name = key if part == "all" else f"{key}_{part}"
        ratios = [(b.per_job(part) / a.per_job(part) - 1) * 100 for a, b in pairs]
        units = ratios
        if len(ratios) % 2 == 0:
            units = [(x + y) / 2 for x, y in zip(ratios[::2], ratios[1::2], strict=True)]
        results[f"{name}_pct"] = statistics.median(units)
        results[f"{name}_stderr_pct"] = statistics.stdev(units) / len(units) ** 0.5
        results[f"{name}_range_pct"] = max(units) - min(units)
        results[f"{name}_round_range_pct"] = max(ratios) - min(ratios)
    return results


def bench_overhead(
    dbs: databases.Scratchpad, jobs: int, rounds: int, what: str
) -> dict[str, float]:
    """``what``: "batch" (``jobs`` no-op jobs in one batch vs not), "metrics" (the same jobs,
    metrics served and scraped vs off), or "same" (plain vs plain: the method's own bias, to be
    near 0); lanes of 4 each. A lane of 1, a thread and its one backend handing each job back and
    forth, moved by up to 25 points from round to round once claims stopped waiting for their
    flush; lanes of 4 within 5."""
    threads = 4
    pairs: list[tuple[Window, Window]] = []
    loads = [os.getloadavg()[0]]
    for round_no in range(rounds):
        pair = side_by_side(
            dbs,
            jobs,
            threads,
            _prepare_batched if what == "batch" else _prepare_plain,
            b_metrics=what == "metrics",
            first="a" if round_no % 2 == 0 else "b",
        )
        pairs.append(pair)
        loads.append(os.getloadavg()[0])
        a, b = pair
        print(
            f"  {what} round {round_no + 1}: {a.per_job() * 1e6:.0f} vs {b.per_job() * 1e6:.0f}"
            f" us CPU per job ({(b.per_job() / a.per_job() - 1) * 100:+.1f} %),"
            f" load average {loads[-1]:.2f}",
            flush=True,
        )
    key = {"batch": "batch_overhead", "metrics": "metrics_overhead", "same": "same_overhead"}[what]
    by_db = all(a.sessions_s is not None for pair in pairs for a in pair)
    results = overheads(pairs, key, ("all", "db", "worker") if by_db else ("all",))
    results[f"{key}_by_cpu_of_sessions"] = float(by_db)
    results[f"{key}_base_cpu_us_per_job"] = statistics.median(a.per_job() for a, _ in pairs) * 1e6
    results[f"{key}_wall_pct"] = statistics.median(
        (b.seconds / b.jobs) / (a.seconds / a.jobs) * 100 - 100 for a, b in pairs
    )
    results[f"{key}_rounds"] = rounds
    results[f"{key}_load_min"] = min(loads)
    results[f"{key}_load_max"] = max(loads)
    return results


def _prepare_plain(conn: connect.Connection, jobs: int, side: str) -> None:
    enqueue_many([noop.call() for _ in range(jobs)], conn=conn)


def _prepare_batched(conn: connect.Connection, jobs: int, side: str) -> None:
    """Side a: plain jobs; side b: as many, in one batch (with a callback)."""
    calls = [noop.call() for _ in range(jobs)]
    if side == "a":
        enqueue_many(calls, conn=conn)
        return
    with batch(conn=conn, on_finish=done.call()):
        enqueue_many(calls, conn=conn)


def _units(rounds: float) -> str:
    count = int(rounds)
    if count % 2:
        return f"{count} rounds"
    return f"{count // 2} pairs of rounds (one started each way)"


def report_overhead(results: dict[str, float], key: str, title: str) -> None:
    if f"{key}_pct" not in results:
        return
    parts = ""
    if results[f"{key}_by_cpu_of_sessions"]:
        parts = (
            f"; in the database {results[f'{key}_db_pct']:+.1f} %"
            f" ± {results[f'{key}_db_stderr_pct']:.1f}, in the worker"
            f" {results[f'{key}_worker_pct']:+.1f} % ± {results[f'{key}_worker_stderr_pct']:.1f}"
        )
    print(
        f"{title}: {results[f'{key}_pct']:+.1f} % ± {results[f'{key}_stderr_pct']:.1f}"
        f" (median of {_units(results[f'{key}_rounds'])} ± standard error, within"
        f" {results[f'{key}_range_pct']:.1f} points; single rounds within"
        f" {results[f'{key}_round_range_pct']:.1f}){parts}; base"
        f" {results[f'{key}_base_cpu_us_per_job']:.0f} us CPU per job; wall time per job"
        f" {results[f'{key}_wall_pct']:+.1f} %; load average {results[f'{key}_load_min']:.2f}"
        f" to {results[f'{key}_load_max']:.2f}"
    )


def report(results: dict[str, float]) -> None:
    rows = []
    if "enqueue_per_s" in results:
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
                "claims per job, 300 single jobs/s, lane of 16",
                f"{results['claims_per_job_16_threads']:.2f}",
            ),
        ]
    width = max((len(name) for name, _ in rows), default=0)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print("overheads: two worker processes side by side, CPU per job (worker + its sessions)")
    for key, title in OVERHEADS.values():
        report_overhead(results, key, title)
    keys = [
        "enqueue_per_s",
        "bulk_enqueue_per_s",
        "drain_per_s_1",
        "drain_per_s_4",
        "wake_p50_ms",
        "wake_p95_ms",
        "wake_p99_ms",
        "claims_per_job_16_threads",
    ]
    for key, _ in OVERHEADS.values():
        keys += [f"{key}_pct", f"{key}_stderr_pct", f"{key}_range_pct", f"{key}_db_pct"]
        keys += [f"{key}_wall_pct", f"{key}_load_min", f"{key}_load_max"]
    keys.append("load_avg_1m")
    print(json.dumps({key: round(results[key], 2) for key in keys if key in results}))


if __name__ == "__main__":
    main()
