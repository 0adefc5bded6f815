#!/usr/bin/env python3
"""Benchmark of the migration engine against the demo CRM API, on a real PostgreSQL.

Uses FERRYMAN_DATABASE_URL's server or an embedded one (fsync on); a fresh database per scenario.
Prints a table, then as its LAST line one JSON object with:

- rows_per_s: an import of 400,000 organizations from the demo API (no latency), 4 lane threads,
  the median of --rounds runs (3);
- baseline_rows_per_s: the same 400,000 rows, fetched beforehand, inserted into the same table
  with one plain executemany in one transaction (no ledger, no windows, no validation); each
  right after an import round, the median of the rounds;
- ratio: rows_per_s / baseline_rows_per_s (information: the baseline bounds nothing a user
  chooses between; the peer is dlt, below);
- email_speedup_4_threads: the e-mail phase with 20 ms per body, 4 fetch threads vs 1 (lane of 1);
- per_row_cost_ratio_1m_vs_100k: seconds per row importing 1,000,000 organizations over the same
  for 100,000 (medians of --rounds runs of each, the sizes alternating);
- against dlt (``pip install -e '.[bench]'``), 200,000 organizations at 0 ms per listing and (keys
  ending ``_20ms``) at 20 ms: ferryman_rows_per_s, dlt_append_rows_per_s, dlt_merge_rows_per_s
  (medians), ratio_vs_dlt_append and ratio_vs_dlt_merge (medians of the ratios within each round),
  window_50_gain (windows of 50 over 25, within each round), ratio_vs_dlt_append_2_processes
  (the same 4 lane threads as 2 worker processes x 2, over dlt appending),
  generated_vs_handwritten_writers (the writer generated from the demo CRM's mapping over its
  hand-written PL/pgSQL writer, rows/s within each round), cpu_per_row_vs_dlt_append and
  cpu_per_row_2_processes_vs_dlt_append (the CPU-seconds every process spent per row: the
  loader's, the demo API's and PostgreSQL's, ferryman's over dlt appending's, within each
  round), and load_avg_1min (the machine's load: on a busy machine compare the ratios, not the
  rates).

    .venv/bin/python -P hack/bench/migrate.py [--quick] [--rounds N] [--cpus 0] [--processes 2]
        [--peers-only [--latency 0]] [--writers-only]

``--cpus`` pins the benchmark, the demo API and the embedded PostgreSQL it starts to those CPUs
(Linux), to compare the engine and the baseline on fewer cores. ``--processes`` runs the
organization imports on that many ``ferryman worker`` processes sharing the 4 lane threads
(their CPU counts as the worker's), instead of one worker in this process. ``--peers-only``
runs only the comparison with dlt, where every load (ferryman's too) runs in a process of its
own (``hack/bench/dlt_load.py`` for dlt); ``--writers-only`` only its generated writer against
the hand-written one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
from psycopg.conninfo import conninfo_to_dict

from ferryman_worker import contract
from ferryman_worker.db import connect, databases
from ferryman_worker.engine import runs
from ferryman_worker.engine import tasks as _tasks  # noqa: F401  (registers the task job)
from ferryman_worker.engine.runtime import RESOURCE, EngineRuntime, credential_env_var
from ferryman_worker.queue.worker import Worker
from ferryman_worker.runspec import RunOptions
from ferryman_worker.settings import Settings

sys.path.append(str(pathlib.Path(__file__).resolve().parent))
import meter

DEMOCRM = pathlib.Path(__file__).resolve().parents[1] / "democrm"
DLT_LOAD = pathlib.Path(__file__).resolve().parent / "dlt_load.py"
API_KEY = "bench-key"
SECRET = {"name": "bench", "key": "token"}


@contextlib.contextmanager
def democrm(**options: Any) -> Iterator[tuple[str, int]]:
    """The demo CRM as a subprocess; yields its URL and pid."""
    argv = [
        sys.executable,
        str(DEMOCRM),
        "serve",
        "--port",
        "0",
        "--api-key",
        API_KEY,
        "--malformed-rate",
        "0",
    ]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield str(json.loads(proc.stdout.readline())["url"]), proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def run_import(
    db_url: str,
    crm_url: str,
    kinds: list[str],
    lanes: str = "migrations:4",
    processes: int = 0,
    mapping: dict[str, Any] | None = None,
    provider: str = "democrm",
    name: str = "bench/run",
    **options: Any,
) -> dict[str, Any]:
    """Run one migration to its end on the engine's workers (``workers``); returns timings per
    kind. The run's time is the database's: from its admission to its last task's commit.
    ``mapping``: the run's mapping document (None: the demo CRM's shipped mapping)."""
    os.environ[credential_env_var(SECRET["name"], SECRET["key"])] = API_KEY
    base = contract.engine_options(RunOptions(), max_in_flight=8)  # the defaults, lane of 4
    request = runs.RunRequest(
        name, "bench", provider, crm_url, SECRET, kinds, {**base, **options}, mapping=mapping
    )
    with workers(db_url, lanes, processes), connect.connect(db_url) as conn:
        run = runs.admit(conn, request)
        runs.start(conn, run)
        while (progress := runs.progress(conn, run["id"])[0])["state"] == "running":
            time.sleep(0.25)  # rarely: this process may be the worker's
        assert progress["state"] == "succeeded", progress["error"]
        elapsed = (progress["finished_at"] - progress["started_at"]).total_seconds()
        kinds_rows = runs.kind_progress(conn, progress["id"])
    per_kind = {
        row["kind"]: (row["last_finish"] - row["first_claim"]).total_seconds() for row in kinds_rows
    }
    return {"seconds": elapsed, "rows": int(progress["rows_written"]), "per_kind": per_kind}


@contextlib.contextmanager
def workers(db_url: str, lanes: str, processes: int) -> Iterator[None]:
    """The engine's workers: one in this process (``processes`` 0), or ``processes``
    ``ferryman worker`` subprocesses sharing the lane's threads, all registered before the run
    is admitted."""
    if processes == 0:
        runtime = EngineRuntime()
        settings = Settings(lanes=lanes, poll_interval=1.0)
        worker = Worker(settings, db_url, resources={RESOURCE: runtime})
        worker.start()
        try:
            yield
        finally:
            worker.stop(grace=10)
            runtime.close()
        return
    lane, width = lanes.split(":")
    argv = [sys.executable, "-m", "ferryman_worker.cli", "--log-level", "WARNING", "worker"]
    argv += ["--lanes", f"{lane}:{max(1, int(width) // processes)}", "--poll-interval", "1"]
    env = {**os.environ, "FERRYMAN_DATABASE_URL": db_url}
    procs = [subprocess.Popen(argv, env=env) for _ in range(processes)]
    try:
        with connect.connect(db_url) as conn:
            while _registered(conn) < processes:
                time.sleep(0.05)
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)  # waited: its CPU time counts in os.times()'s children


def _registered(conn: connect.Connection) -> int:
    row = conn.execute("SELECT count(*) AS n FROM ferryman_workers").fetchone()
    return int(row["n"]) if row else 0


def fetch_rows(crm_url: str, count: int) -> list[tuple[Any, ...]]:
    """The baseline's rows: the same organizations, fetched beforehand."""
    rows: list[tuple[Any, ...]] = []
    with httpx.Client(base_url=crm_url, headers={"Authorization": f"Bearer {API_KEY}"}) as http:
        for start in range(0, count, 500):
            data = http.get("/v1/organizations", params={"start": start, "limit": 500}).json()
            rows += [
                ("bench", r["id"], r["name"], r.get("domain"), r.get("created_at"))
                for r in data["data"]
            ]
    return rows


def baseline(db_url: str, rows: list[tuple[Any, ...]]) -> float:
    """Rows/s of one plain executemany of the rows into the same table, in one transaction."""
    with connect.connect(db_url, autocommit=False) as conn, conn.cursor() as cur:
        began = time.perf_counter()
        cur.executemany(
            "INSERT INTO crm_organizations (workspace, source_id, name, domain,"
            " created_at) VALUES (%s, %s, %s, %s, %s)",
            rows,
        )
        conn.commit()
        return len(rows) / (time.perf_counter() - began)


def organizations(
    dbs: databases.Scratchpad,
    count: int,
    rounds: int = 1,
    *,
    compare: bool = False,
    processes: int = 0,
) -> dict[str, Any]:
    """Rows/s of the engine importing ``count`` organizations, per round; with ``compare``,
    each round also runs the baseline right after (alternating, so a change of the machine's
    speed hits both), and the CPU seconds by process of each engine round (``meter.Spent``)."""
    engine: list[float] = []
    plain: list[float] = []
    cpus: list[meter.Spent] = []
    with democrm(organizations=count, people=0, deals=0) as (url, pid):
        rows = fetch_rows(url, count) if compare else []
        for _ in range(rounds):
            with dbs.fresh() as db, meter.metered(pid, meter.postmaster(db)) as spent:
                result = run_import(db, url, ["organizations"], processes=processes)
            cpus.append(spent)
            assert result["rows"] == count, result
            engine.append(result["rows"] / result["seconds"])
            if compare:
                with dbs.fresh() as db:
                    plain.append(baseline(db, rows))
    return {"engine": engine, "baseline": plain, "cpu": cpus}


def sizes(
    dbs: databases.Scratchpad, counts: list[int], rounds: int, processes: int = 0
) -> list[list[float]]:
    """Rows/s of the engine for each of ``counts`` organizations, ``rounds`` times, the sizes
    alternating (one demo API per size, side by side)."""
    rates: list[list[float]] = [[] for _ in counts]
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(democrm(organizations=n, people=0, deals=0))[0] for n in counts]
        for _ in range(rounds):
            for index, (count, url) in enumerate(zip(counts, urls, strict=True)):
                with dbs.fresh() as db:
                    result = run_import(db, url, ["organizations"], processes=processes)
                assert result["rows"] == count, result
                rates[index].append(result["rows"] / result["seconds"])
    return rates


def email_phase(dbs: databases.Scratchpad, threads: int, deals: int) -> float:
    """Seconds of the messages phase with ``threads`` fetch threads, one lane thread."""
    with (
        democrm(
            organizations=50, people=50, deals=deals, messages_per_deal=16, body_latency_ms=20
        ) as (url, _),
        dbs.fresh() as db,
    ):
        result = run_import(db, url, [], lanes="migrations:1", fetch_threads=threads)
    return float(result["per_kind"]["messages"])


PEERS = (
    "ferryman",
    "ferryman_w25",
    "ferryman_2p",
    "ferryman_handwritten",
    "dlt_append",
    "dlt_merge",
)
"""The loaders compared: ferryman (windows of 50, the default; and of 25, the default before
it; and with the demo CRM's hand-written PL/pgSQL writer instead of the one generated from its
mapping), dlt appending, dlt merging on ``id``."""
HANDWRITTEN = {"provider": "democrm"}
"""A mapping of no kind: the provider's own PL/pgSQL writers."""


def peers(dbs: databases.Scratchpad, count: int, rounds: int, latency_ms: int) -> dict[str, Any]:
    """Rows/s of each loader in ``PEERS`` importing ``count`` organizations from one demo API
    (``latency_ms`` per listing) into a fresh database of the same server, ``rounds`` times,
    the order rotating each round; each load in a process of its own, after a CHECKPOINT. Also
    the ratios of ferryman to each dlt mode within each round (a busy machine moves both)."""
    measured = loads(dbs, count, rounds, latency_ms, PEERS)
    rates, cpu = measured["rates"], measured["cpu"]
    ratios = {
        mode: [f / d for f, d in zip(rates["ferryman"], rates[mode], strict=True)]
        for mode in ("dlt_append", "dlt_merge", "ferryman_w25")
    }
    ratios["handwritten"] = [
        f / h for f, h in zip(rates["ferryman"], rates["ferryman_handwritten"], strict=True)
    ]
    ratios["two_processes"] = [
        f / d for f, d in zip(rates["ferryman_2p"], rates["dlt_append"], strict=True)
    ]
    ratios["cpu_vs_dlt_append"] = [
        f["total"] / d["total"] for f, d in zip(cpu["ferryman"], cpu["dlt_append"], strict=True)
    ]
    ratios["cpu_2_processes_vs_dlt_append"] = [
        f["total"] / d["total"] for f, d in zip(cpu["ferryman_2p"], cpu["dlt_append"], strict=True)
    ]
    return {"rates": rates, "ratios": ratios, "cpu": cpu}


def loads(
    dbs: databases.Scratchpad, count: int, rounds: int, latency_ms: int, loaders: tuple[str, ...]
) -> dict[str, Any]:
    """Rows/s of each of ``loaders`` per round (see ``peers``), and the CPU-seconds per 1,000
    rows each load cost every process (the loader's, the demo API's, PostgreSQL's)."""
    rates: dict[str, list[float]] = {name: [] for name in loaders}
    cpu: dict[str, list[dict[str, float]]] = {name: [] for name in loaders}
    with democrm(organizations=count, people=0, deals=0, latency_ms=latency_ms) as (url, pid):
        for round_ in range(rounds):
            turn = round_ % len(loaders)
            for name in loaders[turn:] + loaders[:turn]:
                with dbs.fresh() as db:
                    with connect.connect(db) as conn:
                        conn.execute("CHECKPOINT")
                    with meter.metered(pid, meter.postmaster(db)) as spent:
                        rows, seconds = _load(name, db, url, count)
                assert rows == count, (name, rows)
                rates[name].append(rows / seconds)
                cpu[name].append(spent.per_1000(rows))
    return {"rates": rates, "cpu": cpu}


def writers_only(dbs: databases.Scratchpad, count: int, rounds: int) -> None:
    """The generated writer against the hand-written one alone (no dlt needed): a line per
    round, then the JSON line with ``generated_vs_handwritten_writers`` (rows/s) and
    ``generated_vs_handwritten_cpu`` (CPU-seconds per row of every process, the loader's, the
    demo API's and PostgreSQL's; and of PostgreSQL alone: ``..._postgres_cpu``), the medians
    of the ratios within each round."""
    measured = loads(dbs, count, rounds, 0, ("ferryman", "ferryman_handwritten"))
    rates, cpu = measured["rates"], measured["cpu"]
    ratios = [f / h for f, h in zip(rates["ferryman"], rates["ferryman_handwritten"], strict=True)]
    by = {
        part: [
            g[part] / h[part]
            for g, h in zip(cpu["ferryman"], cpu["ferryman_handwritten"], strict=True)
        ]
        for part in ("total", "loader", "postgres")
    }
    for round_, ratio in enumerate(ratios):
        generated, handwritten = rates["ferryman"][round_], rates["ferryman_handwritten"][round_]
        spent = (cpu["ferryman"][round_], cpu["ferryman_handwritten"][round_])
        print(
            f"round {round_ + 1}: generated {generated:,.0f} rows/s, hand-written"
            f" {handwritten:,.0f} rows/s, ratio {ratio:.3f}; CPU-s per 1,000 rows (loader /"
            f" PostgreSQL) {spent[0]['loader']:.4f} / {spent[0]['postgres']:.4f} against"
            f" {spent[1]['loader']:.4f} / {spent[1]['postgres']:.4f}"
        )
    print(
        json.dumps(
            {
                "generated_vs_handwritten_writers": round(statistics.median(ratios), 3),
                "generated_vs_handwritten_cpu": round(statistics.median(by["total"]), 3),
                "generated_vs_handwritten_loader_cpu": round(statistics.median(by["loader"]), 3),
                "generated_vs_handwritten_postgres_cpu": round(
                    statistics.median(by["postgres"]), 3
                ),
                "load_avg_1min": os.getloadavg()[0],
            }
        )
    )


def _load(name: str, db_url: str, crm_url: str, count: int) -> tuple[int, float]:
    """One load by ``name``; returns (rows now in its table, seconds)."""
    if name.startswith("ferryman"):
        window: dict[str, Any] = {"window_size": 25} if name == "ferryman_w25" else {}
        processes = 2 if name == "ferryman_2p" else 1  # the same 4 lane threads, 2 x 2
        mapping = HANDWRITTEN if name == "ferryman_handwritten" else None
        result = run_import(
            db_url, crm_url, ["organizations"], processes=processes, mapping=mapping, **window
        )
        return result["rows"], result["seconds"]
    mode = name.removeprefix("dlt_")
    argv = [sys.executable, "-P", str(DLT_LOAD), crm_url, API_KEY, _dsn(db_url), str(count), mode]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"dlt {mode} failed: {done.stderr[-2000:]}")
    seconds = float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
    with connect.connect(db_url) as conn:
        row = conn.execute("SELECT count(*) AS n FROM dlt_bench.organizations").fetchone()
    return (int(row["n"]) if row else 0), seconds


def _dsn(db_url: str) -> str:
    """A postgresql:// URL of ``db_url`` (dlt takes no keyword strings, and wants a password);
    a socket directory goes in the ``host`` query parameter."""
    params = conninfo_to_dict(db_url)
    host = str(params.pop("host", "localhost"))
    user, dbname = params.pop("user", "postgres"), params.pop("dbname", "postgres")
    password = f":{params.pop('password', 'unused')}"  # dlt insists; trust auth ignores it
    port = params.pop("port", "5432")
    if host.startswith("/"):
        return f"postgresql://{user}{password}@localhost:{port}/{dbname}?host={host}"
    return f"postgresql://{user}{password}@{host}:{port}/{dbname}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes (smoke run)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="alternating engine/baseline rounds of the 400,000-row comparison (default 3)",
    )
    parser.add_argument(
        "--cpus",
        type=lambda text: {int(cpu) for cpu in text.split(",")},
        help="run everything on these CPUs only, e.g. 0 or 0,1 (Linux; children inherit it)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        choices=(0, 1, 2, 4),
        default=0,
        help="ferryman worker processes sharing the 4 lane threads in the organization imports "
        "(default 0: a worker in this process)",
    )
    parser.add_argument(
        "--writers-only",
        action="store_true",
        help="only the generated writer against the hand-written one (no dlt needed)",
    )
    parser.add_argument(
        "--peers-only",
        action="store_true",
        help="only the comparison with dlt (and windows of 25), at 0 and 20 ms listing latency",
    )
    parser.add_argument(
        "--latency",
        type=int,
        action="append",
        choices=(0, 20),
        help="with --peers-only: only this listing latency in ms (repeatable; default 0 and 20)",
    )
    args = parser.parse_args()
    if args.cpus:
        os.sched_setaffinity(0, args.cpus)
    scale = 10 if args.quick else 1
    rounds = max(1, args.rounds)
    load_before = os.getloadavg()
    with databases.server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url:
        dbs = databases.Scratchpad(admin_url, "ferryman_migbench")
        if args.writers_only:
            writers_only(dbs, 200_000 // scale, rounds)
            return
        results = {} if args.peers_only else measure(dbs, scale, rounds, args.processes)
        results["peers"] = {
            latency: peers(dbs, 200_000 // scale, rounds, latency)
            for latency in args.latency or (0, 20)
        }
    results["load"] = (load_before, os.getloadavg())
    report(results)


def measure(
    dbs: databases.Scratchpad, scale: int, rounds: int, processes: int = 0
) -> dict[str, Any]:
    count = 400_000 // scale
    compared = organizations(dbs, count, rounds, compare=True, processes=processes)
    by_size = sizes(dbs, [100_000 // scale, 1_000_000 // scale], rounds, processes)
    small, large = (statistics.median(rates) for rates in by_size)
    one = email_phase(dbs, 1, 60 // max(scale // 5, 1))
    four = email_phase(dbs, 4, 60 // max(scale // 5, 1))
    engine, plain_rounds = compared["engine"], compared["baseline"]
    rows_per_s, plain = statistics.median(engine), statistics.median(plain_rounds)
    cpu = compared["cpu"][engine.index(statistics.median_low(engine))]
    return {
        "rows_per_s": rows_per_s,
        "baseline_rows_per_s": plain,
        "ratio": rows_per_s / plain,
        "rounds_engine": engine,
        "rounds_baseline": plain_rounds,
        "rows_per_s_100k": small,
        "rows_per_s_1m": large,
        "rounds_100k": by_size[0],
        "rounds_1m": by_size[1],
        "per_row_cost_ratio_1m_vs_100k": small / large,
        "email_1_thread_s": one,
        "email_4_threads_s": four,
        "email_speedup_4_threads": one / four,
        "cpu_worker_s": cpu.loader,
        "cpu_demo_s": cpu.server,
        "cpu_postgres_s": cpu.postgres,
        "cpu_import_s": count / statistics.median_low(engine),
        "processes": processes,
        "count": count,
        "sizes": (100_000 // scale, 1_000_000 // scale),
    }


def report(r: dict[str, Any]) -> None:
    rows = engine_rows(r) if "rows_per_s" in r else []
    for latency, peer in r["peers"].items():
        rows += peer_rows(peer, latency)
    before, after = r["load"]
    rows.append(("load average (1/5/15 min) at start / at end", f"{_avg(before)} / {_avg(after)}"))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    summary = {key: round(r[key], 3) for key in ENGINE_KEYS if key in r}
    for latency, peer in r["peers"].items():
        suffix = "" if latency == 0 else f"_{latency}ms"
        rates, ratios = peer["rates"], peer["ratios"]
        summary |= {
            f"ferryman_rows_per_s{suffix}": round(statistics.median(rates["ferryman"])),
            f"dlt_append_rows_per_s{suffix}": round(statistics.median(rates["dlt_append"])),
            f"dlt_merge_rows_per_s{suffix}": round(statistics.median(rates["dlt_merge"])),
            f"ratio_vs_dlt_append{suffix}": round(statistics.median(ratios["dlt_append"]), 3),
            f"ratio_vs_dlt_merge{suffix}": round(statistics.median(ratios["dlt_merge"]), 3),
            f"window_50_gain{suffix}": round(statistics.median(ratios["ferryman_w25"]), 3),
            f"ratio_vs_dlt_append_2_processes{suffix}": round(
                statistics.median(ratios["two_processes"]), 3
            ),
            f"generated_vs_handwritten_writers{suffix}": round(
                statistics.median(ratios["handwritten"]), 3
            ),
            f"cpu_per_row_vs_dlt_append{suffix}": round(
                statistics.median(ratios["cpu_vs_dlt_append"]), 3
            ),
            f"cpu_per_row_2_processes_vs_dlt_append{suffix}": round(
                statistics.median(ratios["cpu_2_processes_vs_dlt_append"]), 3
            ),
        }
    summary["load_avg_1min"] = round(max(before[0], after[0]), 2)
    print(json.dumps(summary))


ENGINE_KEYS = (
    "rows_per_s",
    "baseline_rows_per_s",
    "ratio",
    "email_speedup_4_threads",
    "per_row_cost_ratio_1m_vs_100k",
)


def peer_rows(peer: dict[str, Any], latency: int) -> list[tuple[str, str]]:
    rates, ratios = peer["rates"], peer["ratios"]
    count = len(rates["ferryman"])
    rows = [
        (
            f"vs dlt, {latency} ms per listing, each load in its own process, medians of {count}"
            " rounds, order rotating",
            "",
        )
    ]
    names = {
        "ferryman": "  ferryman, 4 lane threads, windows of 50 (the default)",
        "ferryman_w25": "  ferryman, windows of 25",
        "ferryman_2p": "  ferryman, 2 worker processes x 2 lane threads, windows of 50",
        "ferryman_handwritten": "  ferryman, the hand-written PL/pgSQL writer",
        "dlt_append": "  dlt, append",
        "dlt_merge": "  dlt, merge on id",
    }
    for name, label in names.items():
        median = statistics.median(rates[name])
        rows.append((label, f"{median:,.0f} rows/s ({_each(rates[name])}); {_cpu(peer, name)}"))
    for mode, label in (
        ("cpu_vs_dlt_append", "CPU per row, ferryman / dlt_append"),
        ("cpu_2_processes_vs_dlt_append", "CPU per row, ferryman 2 x 2 / dlt_append"),
        ("dlt_append", "ferryman / dlt_append"),
        ("dlt_merge", "ferryman / dlt_merge"),
        ("two_processes", "ferryman 2 x 2 / dlt_append"),
        ("handwritten", "generated writer / hand-written writer"),
    ):
        each = " / ".join(f"{ratio:.2f}" for ratio in ratios[mode])
        rows.append((f"  {label}, per round", f"{statistics.median(ratios[mode]):.2f} ({each})"))
    return rows


def _cpu(peer: dict[str, Any], name: str) -> str:
    """The median CPU-seconds per 1,000 rows of a loader's loads, in all and by process."""
    spent = peer["cpu"][name]
    median = {part: statistics.median(load[part] for load in spent) for part in spent[0]}
    return (
        f"CPU-s per 1,000 rows {median['total']:.4f} (loader {median['loader']:.4f},"
        f" demo API {median['server']:.4f}, PostgreSQL {median['postgres']:.4f})"
    )


def engine_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    rounds = len(r["rounds_engine"])
    where = "this process" if r["processes"] == 0 else f"{r['processes']} process(es)"
    return [
        (
            f"import {r['count']:,} organizations (4 lane threads in {where}), median of {rounds}",
            f"{r['rows_per_s']:,.0f} rows/s ({_each(r['rounds_engine'])})",
        ),
        (
            "baseline: plain executemany of the same rows, alternating",
            f"{r['baseline_rows_per_s']:,.0f} rows/s ({_each(r['rounds_baseline'])})",
        ),
        ("  ratio", f"{r['ratio']:.2f}"),
        (
            "  CPU s of the median import: worker / demo API / PostgreSQL",
            f"{r['cpu_worker_s']:.1f} / {r['cpu_demo_s']:.1f} / {r['cpu_postgres_s']:.1f}"
            f" in {r['cpu_import_s']:.1f} s on {len(os.sched_getaffinity(0))} core(s)",
        ),
        (
            f"import {r['sizes'][0]:,} / {r['sizes'][1]:,} organizations, medians of {rounds},"
            " alternating",
            f"{r['rows_per_s_100k']:,.0f} / {r['rows_per_s_1m']:,.0f} rows/s"
            f" ({_each(r['rounds_100k'])}; {_each(r['rounds_1m'])})",
        ),
        ("  per-row cost, 1M vs 100k", f"{r['per_row_cost_ratio_1m_vs_100k']:.2f}"),
        (
            "e-mail phase, 20 ms per body, 1 vs 4 fetch threads",
            f"{r['email_1_thread_s']:.1f} s vs {r['email_4_threads_s']:.1f} s",
        ),
        ("  speed-up", f"{r['email_speedup_4_threads']:.2f}"),
    ]


def _avg(load: tuple[float, float, float]) -> str:
    return "/".join(f"{value:.2f}" for value in load)


def _each(values: list[float]) -> str:
    return " / ".join(f"{value:,.0f}" for value in values)


if __name__ == "__main__":
    main()
