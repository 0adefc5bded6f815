#!/usr/bin/env python3
"""Benchmark of a re-run: a run of a workspace that is already fully imported (every record in the
ledger, nothing to write) against the first run of the same data from the same server, and
against the listing alone (the same pages fetched and parsed, nothing written).

For the demo CRM (its organizations and as many people, written into the application's tables
by its shipped mapping, on a worker in this process) and each real server (json-server,
PocketBase: hack/sources, built and seeded on first use), per round, into a fresh database:
``first`` (for a real server, ``ferryman run`` of examples/sources/<server> as
hack/bench/sources.py runs it), then ``again`` (the same run under another name: same
workspace, same ledger), then ``alone`` (every page the run lists, read as ``ferryman provider
sample`` reads them: the same requests, one after another on one client, each record
validated, nothing written). Each is timed by the run's own start and finish (``alone``: its
loop), with the CPU-seconds of the loader, the server and PostgreSQL; per kind, a run's seconds
are its tasks' span.

The LAST line is one JSON object: ``<server>_rerun_vs_first_run`` (again's seconds over first's,
the median of the rounds' ratios; target <= 0.5), ``<server>_rerun_vs_listing`` (again's over
alone's; target <= 1.2) and the same per kind, with the loads they come from.

    .venv/bin/python -P hack/bench/rerun.py [--rounds N] [--page N] [--organizations N]
        [--servers democrm,json-server,pocketbase]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any

from ferryman_worker import providers
from ferryman_worker.db import connect, databases, migrate
from ferryman_worker.engine import auth, sample
from ferryman_worker.engine.source import SourceClient
from ferryman_worker.providers import declarative

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import meter
import migrate as migrate_bench  # hack/bench/migrate.py: the demo CRM and its runs

import sources
from sources import Load, Target, log

SERVERS = ("democrm", "json-server", "pocketbase")
DEMOCRM_KINDS = ["organizations", "people"]
"""The demo CRM's page-walked kinds, one phase after the other (people refer to organizations),
written into the application's tables by its shipped mapping."""


def ferryman_run(
    target: Target, db_url: str, pg_pid: int, name: str
) -> tuple[Load, dict[str, float]]:
    """``ferryman run`` of the example as sources.py runs it, named ``name`` (the workspace is
    the example's, whatever the name): the load, and each kind's seconds (its tasks' span)."""
    cpu = sources.run_example(target, db_url, pg_pid, name)
    with connect.connect(db_url) as conn:
        run_row = conn.execute(
            "SELECT id, extract(epoch FROM finished_at - started_at) AS seconds, state"
            " FROM ferryman_runs WHERE name = %s OR name LIKE %s",
            (name, f"%/{name}"),
        ).fetchone()
        assert run_row is not None
        if run_row["state"] != "succeeded":
            raise RuntimeError(f"ferryman run {name} on {target.server}: {run_row['state']}")
        kinds = conn.execute(
            "SELECT kind, extract(epoch FROM max(finished_at) - min(claimed_at)) AS seconds,"
            " sum(rows_written) AS written, sum(rows_skipped) AS skipped"
            " FROM ferryman_tasks WHERE run_id = %s GROUP BY kind",
            (run_row["id"],),
        ).fetchall()
    rows = sum(int(k["written"]) + int(k["skipped"]) for k in kinds)
    return Load(rows, float(run_row["seconds"]), cpu), {
        k["kind"]: float(k["seconds"]) for k in kinds
    }


def listing_alone(target: Target, db_url: str, pg_pid: int) -> tuple[Load, dict[str, float]]:
    """Every page of each collection as the run lists them: the run's provider, its requests,
    pagination and stop rules (``engine.sample``, as ``ferryman provider sample`` reads), one
    page after another on one client, each record validated; nothing written."""
    document = sources.provider_document(target, sources.EXAMPLES / target.server / "provider.yaml")
    provider = declarative.from_definition(document["metadata"]["name"], document)
    values = {role: target.token or "unused" for role in auth.KEYS[provider.auth.style]}
    client = SourceClient(target.running.url, auth.build(provider.auth, values), timeout=120.0)
    rows, per_kind = 0, {}
    try:
        with sources.metered(target, pg_pid) as cpu:
            began, own = time.perf_counter(), time.process_time()
            for name in target.collections:
                started = time.perf_counter()
                pages = sample.sample(provider, name, client, pages=UNCAPPED, page_size=target.page)
                rows += sum(len(page.records) for page in pages)
                per_kind[name] = time.perf_counter() - started
            seconds = time.perf_counter() - began
            cpu["loader"] = time.process_time() - own
    finally:
        client.close()
    return Load(rows, seconds, cpu), per_kind


UNCAPPED = 10**9
"""Pages ``listing_alone`` may read of a collection: all of them (its stop rules end it)."""


def democrm_rounds(size: int, dbs: databases.Scratchpad, rounds: int) -> list[dict[str, Any]]:
    """The rounds against the demo CRM (``size`` organizations and as many people), its runs on
    a worker in this process (hack/bench/migrate.py), its listing alone through its provider."""
    measured = []
    with migrate_bench.democrm(organizations=size, people=size, deals=0) as (url, crm_pid):
        for round_ in range(rounds):
            with dbs.fresh() as db:
                with connect.connect(db) as conn:
                    migrate.migrate(conn)
                    conn.execute("CHECKPOINT")
                pg = meter.postmaster(db)
                loads = {}
                for what in ("first", "again"):
                    with meter.metered(crm_pid, pg) as spent:
                        result = migrate_bench.run_import(
                            db, url, DEMOCRM_KINDS, name=f"bench/{what}-{round_}"
                        )
                    loads[what] = (
                        Load(2 * size, result["seconds"], vars(spent)),
                        result["per_kind"],
                    )
                with meter.metered(crm_pid, pg) as spent:
                    alone, per_kind = democrm_listing(url)
                loads["alone"] = (Load(2 * size, alone, vars(spent)), per_kind)
            measured.append(
                {k: load.summary() | {"kinds_s": kinds} for k, (load, kinds) in loads.items()}
            )
            log(
                f"democrm round {round_ + 1}: "
                + ", ".join(f"{k} {v[0].seconds:.2f} s" for k, v in loads.items())
            )
    return measured


def democrm_listing(url: str) -> tuple[float, dict[str, float]]:
    """Every page of the demo CRM's kinds read through its provider (``engine.sample``), one
    after another on one client; the seconds in all and per kind."""
    provider = providers.resolve("democrm", None)
    values = {role: migrate_bench.API_KEY for role in auth.KEYS[provider.auth.style]}
    client = SourceClient(url, auth.build(provider.auth, values), timeout=120.0)
    per_kind = {}
    try:
        began = time.perf_counter()
        for name in DEMOCRM_KINDS:
            started = time.perf_counter()
            size = provider.kinds[name].max_page_size
            for _ in sample.sample(provider, name, client, pages=UNCAPPED, page_size=size):
                pass
            per_kind[name] = time.perf_counter() - started
        return time.perf_counter() - began, per_kind
    finally:
        client.close()


def rounds_of(target: Target, dbs: databases.Scratchpad, rounds: int) -> list[dict[str, Any]]:
    measured = []
    for round_ in range(rounds):
        with dbs.fresh() as db:
            with connect.connect(db) as conn:
                migrate.migrate(conn)
                conn.execute("CHECKPOINT")
            pg = sources.postmaster(db)
            first, first_kinds = ferryman_run(target, db, pg, f"first-{round_}")
            again, again_kinds = ferryman_run(target, db, pg, f"again-{round_}")
            alone, alone_kinds = listing_alone(target, db, pg)
        for what, load in (("first", first), ("again", again), ("alone", alone)):
            log(f"{target.server} round {round_ + 1} {what}: {sources.describe(load)}")
        measured.append(
            {
                "first": first.summary() | {"kinds_s": first_kinds},
                "again": again.summary() | {"kinds_s": again_kinds},
                "alone": alone.summary() | {"kinds_s": alone_kinds},
            }
        )
    return measured


def summary(server: str, measured: list[dict[str, Any]]) -> dict[str, Any]:
    key = server.replace("-", "")

    def median(top: str, bottom: str, kind: str | None = None) -> float:
        if kind is None:
            return statistics.median(m[top]["seconds"] / m[bottom]["seconds"] for m in measured)
        return statistics.median(
            m[top]["kinds_s"][kind] / m[bottom]["kinds_s"][kind] for m in measured
        )

    kinds = sorted(measured[0]["again"]["kinds_s"])
    return {
        f"{key}_rerun_vs_first_run": median("again", "first"),
        f"{key}_rerun_vs_listing": median("again", "alone"),
        f"{key}_kinds_rerun_vs_first_run": {k: median("again", "first", k) for k in kinds},
        f"{key}_kinds_rerun_vs_listing": {k: median("again", "alone", k) for k in kinds},
        f"{key}_rounds": measured,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server (default 3)")
    parser.add_argument("--page", type=int, default=1000, help="records a page (default 1000)")
    parser.add_argument("--organizations", type=int, default=sources.crm.DEFAULT_ORGANIZATIONS)
    parser.add_argument(
        "--servers", type=lambda text: tuple(text.split(",")), default=SERVERS, help="a,b"
    )
    args = parser.parse_args()
    out: dict[str, Any] = {"load_avg_before": os.getloadavg()}
    with (
        databases.server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url,
        tempfile.TemporaryDirectory(prefix="ferryman-rerun-bench-") as scratch,
    ):
        dbs = databases.Scratchpad(admin_url, "ferryman_rerunbench")
        for name in args.servers:
            if name == "democrm":
                out |= summary(name, democrm_rounds(args.organizations, dbs, args.rounds))
                continue
            target = sources.started(name, pathlib.Path(scratch) / name, args)
            try:
                out |= summary(name, rounds_of(target, dbs, args.rounds))
            finally:
                sources.stop(target)
    out["load_avg_after"] = os.getloadavg()
    out["rounds"], out["page"], out["organizations"] = args.rounds, args.page, args.organizations
    print(json.dumps(out))


if __name__ == "__main__":
    main()
