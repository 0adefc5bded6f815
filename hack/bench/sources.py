#!/usr/bin/env python3
"""Benchmark of loads from real source servers (PocketBase, json-server) into PostgreSQL: ferryman
against dlt's ``rest_api`` source, with the same seeded data, rounds alternating.

Uses FERRYMAN_DATABASE_URL's server or an embedded one; a fresh database per load. The servers come
from hack/sources (built and seeded into the cache on first use: ``hack/sources/serve build``).
For each server and round, in rotating order:

- ``alone``: the server's own serving rate, every record of the four collections read page by page
  with one plain httpx client and nothing written (what any loader's rate is bounded by);
- ``dlt``: ``hack/bench/dlt_rest_api.py`` in a process of its own, appending the four collections;
- ``ferryman``: a run of the server's declarative provider (see ``ferryman_load``).

Reported per load: rows/s and CPU-seconds per 1,000 rows of every process involved (the loader,
the server and PostgreSQL: its postmaster and backends). With ``--budget R``, PocketBase's limiter
is on at R requests a second (for its regular user: superusers are never limited) and each loader
reads one collection (`notes`: the limiter keeps one window per collection) with that user's
token; the lower bound of a load is requests needed / R, and a loader's budget efficiency is that
bound over its wall time.

The LAST line is one JSON object with ``pocketbase_ratio_vs_dlt_rest_api``,
``jsonserver_ratio_vs_dlt_rest_api`` (ferryman's rows/s over dlt's, medians of the per-round
ratios), ``pocketbase_budget_efficiency`` (ferryman's), ``dlt_pocketbase_budget_efficiency`` and
the figures they come from; a figure that could not be measured is null, with the reason in
``notes``.

    .venv/bin/python -P hack/bench/sources.py [--rounds N] [--page N] [--budget R]
        [--budget-page N] [--organizations N] [--servers pocketbase,json-server]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import yaml

from ferryman_worker.db import connect, databases, migrate
from ferryman_worker.engine.runtime import credential_env_var

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hack" / "sources"))
sys.path.insert(0, str(ROOT / "hack" / "bench"))

from meter import postgres_cpu, postmaster, proc_cpu  # noqa: E402
from migrate import _dsn as dsn  # noqa: E402  (dlt's form of a database URL)
from sourceservers import crm, jsonserver, pocketbase, process  # noqa: E402

DLT_REST_API = pathlib.Path(__file__).resolve().parent / "dlt_rest_api.py"
EXAMPLES = ROOT / "examples" / "sources"
FERRYMAN_LANES = "migrations:4"
"""The ``ferryman run`` worker's lanes: four task threads (the tests' runs of the examples)."""
SERVERS = ("pocketbase", "json-server")
LOADERS = ("alone", "dlt", "ferryman")


@dataclasses.dataclass(frozen=True)
class Load:
    """One load: rows, wall seconds, CPU seconds per process ("loader", "server", "postgres")."""

    rows: int
    seconds: float
    cpu: dict[str, float]

    def summary(self) -> dict[str, Any]:
        per_k = {f"cpu_s_per_1k_rows_{k}": 1000 * v / self.rows for k, v in self.cpu.items()}
        return {"rows": self.rows, "seconds": self.seconds, "rows_per_s": self.rate(), **per_k}

    def rate(self) -> float:
        return self.rows / self.seconds


@dataclasses.dataclass(frozen=True)
class Target:
    """A running server as a loader sees it: where, with which token, how many records."""

    server: str
    running: process.Running
    token: str  # "" for none
    page: int
    collections: tuple[str, ...] = crm.COLLECTIONS
    budget: int = 0
    """PocketBase's limiter in requests a second (0: off)."""

    def pages(self) -> int:
        return sum(math.ceil(self.running.counts[n] / self.page) for n in self.collections)

    def total(self) -> int:
        return sum(self.running.counts[n] for n in self.collections)


@contextlib.contextmanager
def metered(target: Target, pg_pid: int) -> Iterator[dict[str, float]]:
    """CPU seconds the server and PostgreSQL spend inside the block (filled in when it ends)."""
    spent: dict[str, float] = {}
    server, postgres = proc_cpu(target.running.pid), postgres_cpu(pg_pid)
    yield spent
    spent["server"] = proc_cpu(target.running.pid) - server
    spent["postgres"] = postgres_cpu(pg_pid) - postgres


def serve_alone(target: Target, db_url: str, pg_pid: int) -> Load:
    """Every record read with one plain client, page by page, nothing written."""
    headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
    rows = 0
    with (
        httpx.Client(base_url=target.running.url, headers=headers, timeout=120.0) as http,
        metered(target, pg_pid) as cpu,
    ):
        began, client = time.perf_counter(), time.process_time()
        for name in target.collections:
            rows += read_all(http, target, name)
        seconds = time.perf_counter() - began
        cpu["loader"] = time.process_time() - client
    return Load(rows, seconds, cpu)


def read_all(http: httpx.Client, target: Target, name: str) -> int:
    rows, page = 0, 1
    while True:
        if target.server == "pocketbase":
            params: dict[str, Any] = {"page": page, "perPage": target.page, "sort": "id"}
            response = http.get(f"/api/collections/{name}/records", params=params)
            response.raise_for_status()
            body = response.json()
            rows += len(body["items"])
            if page >= body["totalPages"]:
                return rows
        else:
            response = http.get(f"/{name}", params={"_page": page, "_limit": target.page})
            response.raise_for_status()
            rows += len(response.json())
            if 'rel="next"' not in response.headers.get("Link", ""):
                return rows
        page += 1


def loader_process(
    target: Target, pg_pid: int, argv: list[str], what: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, float]]:
    """A loader in a process of its own: its CPU (RUSAGE_CHILDREN's), the server's and
    PostgreSQL's; RuntimeError with its words if it fails."""
    with metered(target, pg_pid) as cpu:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu["loader"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise RuntimeError(f"{what} on {target.server} failed: {done.stderr[-3000:]}")
    return done, cpu


def dlt_load(target: Target, db_url: str, pg_pid: int) -> Load:
    """dlt's rest_api in a process of its own; its CPU is that process's and its children's."""
    dataset = f"dlt_{target.server.replace('-', '_')}"
    argv = [sys.executable, "-P", str(DLT_REST_API), target.server, target.running.url]
    argv += [
        target.token or "-",
        dsn(db_url),
        dataset,
        str(target.page),
        ",".join(target.collections),
    ]
    done, cpu = loader_process(target, pg_pid, argv, "dlt rest_api")
    seconds = float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
    with connect.connect(db_url) as conn:
        rows = 0
        for name in target.collections:
            row = conn.execute(f"SELECT count(*) AS n FROM {dataset}.{name}").fetchone()
            rows += int(row["n"]) if row else 0
    return Load(rows, seconds, cpu)


def ferryman_load(target: Target, db_url: str, pg_pid: int) -> Load | None:
    """ferryman's side: ``ferryman run`` of examples/sources/<server>'s run and declarative
    provider (records landing as jsonb), in a process of its own like dlt (its CPU is
    RUSAGE_CHILDREN's), `target.page` records a page, the collections `target` names; under a
    budget the run declares it as its rate limit. The database is migrated before the load;
    the seconds are the run's own (admitted to finished), as dlt's are ``pipeline.run``'s."""
    with connect.connect(db_url) as conn:
        migrate.migrate(conn)
    cpu = run_example(target, db_url, pg_pid)
    with connect.connect(db_url) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM finished_at - started_at) AS seconds,"
            " (SELECT count(*) FROM ferryman_landing) AS rows FROM ferryman_runs"
        ).fetchone()
    assert row is not None
    return Load(int(row["rows"]), float(row["seconds"]), cpu)


def run_example(target: Target, db_url: str, pg_pid: int, name: str = "") -> dict[str, float]:
    """``ferryman run`` of examples/sources/<server>'s run (named ``name``, else the example's
    name) and declarative provider, as ``target`` shapes them, in a process of its own: its CPU
    and PostgreSQL's."""
    example = EXAMPLES / target.server
    with tempfile.TemporaryDirectory(prefix="ferryman-sources-bench-run-") as folder:
        document = run_document(target, example / "run.yaml")
        if name:
            document["metadata"]["name"] = name
        run = pathlib.Path(folder) / "run.yaml"
        run.write_text(yaml.safe_dump(document))
        provider = pathlib.Path(folder) / "provider.yaml"
        provider.write_text(yaml.safe_dump(provider_document(target, example / "provider.yaml")))
        env = {key: value for key, value in os.environ.items() if not key.startswith("FERRYMAN_")}
        env.update(FERRYMAN_DATABASE_URL=db_url, FERRYMAN_LANES=FERRYMAN_LANES)
        env[credential_env_var(run_secret(run), "token")] = target.token or "unused"
        argv = [sys.executable, "-P", "-m", "ferryman_worker.cli", "--log-level", "WARNING"]
        argv += ["run", str(run), "--provider-file", str(provider)]
        _, cpu = loader_process(target, pg_pid, argv, f"ferryman run {name}".rstrip(), env)
    return cpu


def run_document(target: Target, example: pathlib.Path) -> dict[str, Any]:
    """The example's MigrationRun at the target: its URL, page size, collections and (under a
    budget) the budget as its rate limit, one request's worth at a time."""
    document: dict[str, Any] = yaml.safe_load(example.read_text())
    spec = document["spec"]
    spec["source"]["baseURL"] = target.running.url
    spec["kinds"] = list(target.collections)
    spec.setdefault("options", {})["pageSize"] = target.page
    if target.budget:
        spec["source"]["rateLimit"] = {"tokensPerSecond": float(target.budget), "burst": 1}
    return document


def provider_document(target: Target, example: pathlib.Path) -> dict[str, Any]:
    """The example's provider, walked as dlt's rest_api walks the server (unless
    ``--example-provider``): its collections side by side in one phase (rows land as jsonb: no
    kind refers to another's rows, and dlt has no phases), and on PocketBase every collection by
    page number, as dlt pages them (the example reads notes by keyset: one chain of pages)."""
    document: dict[str, Any] = yaml.safe_load(example.read_text())
    if EXAMPLE_PROVIDER_AS_IS:
        return document
    kinds = document["spec"]["kinds"]
    document["spec"]["phases"] = [list(kinds)]
    if target.server == "pocketbase":
        paged = kinds["organizations"]["pagination"]
        for name in target.collections:
            kinds[name]["pagination"] = paged
            kinds[name]["request"]["query"] = {"sort": "id"}
    return document


def run_secret(run: pathlib.Path) -> str:
    return str(yaml.safe_load(run.read_text())["spec"]["source"]["credentialsSecretRef"]["name"])


EXAMPLE_PROVIDER_AS_IS = False
"""``--example-provider``: ferryman walks the servers with examples/sources' providers as
they are."""
BUDGET_COLLECTIONS = ("notes",)
"""The budget run reads one collection: PocketBase's limiter keeps a window per collection, so
over several a loader reading them side by side (dlt does, round-robin) gets several budgets."""
LOADS: dict[str, Callable[[Target, str, int], Load | None]] = {
    "alone": serve_alone,
    "dlt": dlt_load,
    "ferryman": ferryman_load,
}


def rounds_of(
    target: Target, dbs: databases.Scratchpad, rounds: int, loaders: tuple[str, ...]
) -> dict[str, list[Load | None]]:
    """Each loader once a round, the order rotating, each into a fresh database."""
    loads: dict[str, list[Load | None]] = {name: [] for name in loaders}
    for round_ in range(rounds):
        shift = round_ % len(loaders)
        for name in loaders[shift:] + loaders[:shift]:
            with dbs.fresh() as db:
                with connect.connect(db) as conn:
                    conn.execute("CHECKPOINT")
                load = LOADS[name](target, db, postmaster(db))
            if load is not None and name != "alone" and load.rows != target.total():
                raise RuntimeError(f"{name} landed {load.rows} of {target.total()} records")
            loads[name].append(load)
            log(f"{target.server} round {round_ + 1} {name}: {describe(load)}")
    return loads


def describe(load: Load | None) -> str:
    if load is None:
        return "not measured"
    cpu = ", ".join(f"{k} {1000 * v / load.rows:.3f}" for k, v in sorted(load.cpu.items()))
    return f"{load.rows} rows in {load.seconds:.2f} s = {load.rate():,.0f} rows/s; CPU-s/1k: {cpu}"


def median_load(loads: list[Load | None]) -> dict[str, Any] | None:
    measured = [load for load in loads if load is not None]
    if not measured:
        return None
    rates = [load.rate() for load in measured]
    chosen = measured[rates.index(statistics.median_low(rates))]
    return {**chosen.summary(), "rows_per_s": statistics.median(rates), "rounds_rows_per_s": rates}


def ratio(loads: dict[str, list[Load | None]]) -> float | None:
    pairs = [(f, d) for f, d in zip(loads["ferryman"], loads["dlt"], strict=True) if f and d]
    return statistics.median(f.rate() / d.rate() for f, d in pairs) if pairs else None


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def started(name: str, folder: pathlib.Path, args: argparse.Namespace, limit: int = 0) -> Target:
    if name == "json-server":
        running = jsonserver.start(folder, crm.DEFAULT_SEED, args.organizations)
        return Target(name, running, "", args.page)
    if not limit:
        running = pocketbase.start(folder, crm.DEFAULT_SEED, args.organizations)
        return Target(name, running, running.tokens["superuser"], args.page)
    rate = pocketbase.RateLimit(limit, 1)
    running = pocketbase.start(folder, crm.DEFAULT_SEED, args.organizations, rate)
    user = running.tokens["user"]
    return Target(name, running, user, args.budget_page, BUDGET_COLLECTIONS, limit)


def stop(target: Target) -> None:
    process.stop(target.running.pid, target.running.executable)


def budgeted(dbs: databases.Scratchpad, folder: pathlib.Path, args: argparse.Namespace) -> Any:
    """PocketBase with its limiter at --budget requests a second: each loader's efficiency (a
    loader that gives up under the 429s gets none, and its error is kept)."""
    target = started("pocketbase", folder / "pocketbase-budget", args, limit=args.budget)
    bound = target.pages() / args.budget
    out: dict[str, Any] = {"budget_requests_per_s": args.budget, "page": target.page}
    out["collections"] = list(target.collections)
    out.update(requests_needed=target.pages(), lower_bound_s=bound)
    try:
        for name in ("dlt", "ferryman"):
            try:
                load = rounds_of(target, dbs, 1, (name,))[name][0]
            except RuntimeError as error:
                load, out[f"{name}_error"] = None, str(error)[-1000:]
            out[f"{name}_seconds"] = load.seconds if load else None
            out[f"{name}_efficiency"] = bound / load.seconds if load else None
    finally:
        stop(target)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds per server (default 3; 0: the budget run only)",
    )
    parser.add_argument("--page", type=int, default=1000, help="records a page (default 1000)")
    parser.add_argument(
        "--budget",
        type=int,
        default=10,
        help="PocketBase's limiter in requests a second for the budget run (0: skip; default 10)",
    )
    parser.add_argument(
        "--budget-page", type=int, default=100, help="records a page in the budget run (100)"
    )
    parser.add_argument("--organizations", type=int, default=crm.DEFAULT_ORGANIZATIONS)
    parser.add_argument(
        "--servers", type=lambda text: tuple(text.split(",")), default=SERVERS, help="a,b"
    )
    parser.add_argument(
        "--example-provider",
        action="store_true",
        help="ferryman uses examples/sources' providers as they are (phases, notes by keyset)",
    )
    args = parser.parse_args()
    global EXAMPLE_PROVIDER_AS_IS
    EXAMPLE_PROVIDER_AS_IS = args.example_provider
    results: dict[str, Any] = {"load_avg_before": os.getloadavg()}
    with (
        databases.server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url,
        tempfile.TemporaryDirectory(prefix="ferryman-sources-bench-") as scratch,
    ):
        dbs = databases.Scratchpad(admin_url, "ferryman_srcbench")
        for name in args.servers if args.rounds > 0 else ():
            target = started(name, pathlib.Path(scratch) / name, args)
            try:
                results[name] = rounds_of(target, dbs, args.rounds, LOADERS)
            finally:
                stop(target)
        if args.budget and "pocketbase" in args.servers:
            results["budget"] = budgeted(dbs, pathlib.Path(scratch), args)
    results["load_avg_after"] = os.getloadavg()
    print(json.dumps(summary(results, args)))


def summary(results: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    empty: dict[str, list[Load | None]] = {loader: [] for loader in LOADERS}
    for name in SERVERS:
        key = name.replace("-", "")
        loads = results.get(name, empty)
        out[f"{key}_ratio_vs_dlt_rest_api"] = ratio(loads)
        for loader in LOADERS:
            out[f"{key}_{loader}"] = median_load(loads[loader])
        alone = median_load(loads["alone"])
        for loader in ("dlt", "ferryman"):
            chosen = median_load(loads[loader])
            share = chosen["rows_per_s"] / alone["rows_per_s"] if chosen and alone else None
            out[f"{key}_{loader}_share_of_serving_rate"] = share
    budget = results.get("budget", {})
    out["pocketbase_budget_efficiency"] = budget.get("ferryman_efficiency")
    out["dlt_pocketbase_budget_efficiency"] = budget.get("dlt_efficiency")
    out["budget"] = budget or None
    out["records"] = crm.generate(crm.DEFAULT_SEED, args.organizations).total()
    out["rounds"], out["page"] = args.rounds, args.page
    out["load_avg"] = [results["load_avg_before"], results["load_avg_after"]]
    out["notes"] = [
        f"{loader} under the budget: {budget[loader + '_error']}"
        for loader in ("dlt", "ferryman")
        if budget.get(loader + "_error")
    ]
    return out


if __name__ == "__main__":
    main()
