#!/usr/bin/env python3
"""Benchmark of a namespace's share of the workers: one run of namespace team-b queued behind
50 runs of namespace team-a, on one worker whose lane has 4 threads, against the same late run
queued in team-a (in the order of enqueue, as a queue without tenants serves it).

Each round, into a fresh database: the 50 runs are admitted (each a workspace of its own, its
organizations from the demo CRM in 2 stripes), then the late run, then the worker starts. Times
are the database's: from the worker's first claim to the late run's finish (``late``), and to
the last run's finish (``all``). ``fair`` has the late run in team-b, ``fifo`` in team-a.

The LAST line is one JSON object: ``late_run_fair_vs_fifo`` (the late run's seconds with a
namespace of its own over the same run in team-a's queue, the median of the rounds' ratios;
the smaller the fairer) and ``all_runs_fair_vs_fifo`` (every run's seconds; about 1: sharing
costs the fleet nothing), with the rounds' figures and the machine's load.

    .venv/bin/python -P hack/bench/fairshare.py [--rounds N] [--runs N] [--organizations N]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
from typing import Any

from ferryman_worker import contract
from ferryman_worker.db import connect, databases
from ferryman_worker.engine import runs
from ferryman_worker.engine.runtime import credential_env_var
from ferryman_worker.runspec import RunOptions

sys.path.append(str(pathlib.Path(__file__).resolve().parent))
import migrate

LANES = "migrations:4"


def admit(db_url: str, crm_url: str, name: str, workspace: str) -> int:
    options = {
        **contract.engine_options(RunOptions(), max_in_flight=2),
        "stripes": 2,
        "page_size": 100,
    }
    request = runs.RunRequest(
        name, workspace, "democrm", crm_url, migrate.SECRET, ["organizations"], options
    )
    with connect.connect(db_url) as conn:
        row = runs.admit(conn, request)
        runs.start(conn, row)
        return int(row["id"])


def one_round(db_url: str, crm_url: str, runs_of_a: int, late_namespace: str) -> dict[str, float]:
    for i in range(runs_of_a):
        admit(db_url, crm_url, f"team-a/run-{i}", f"a-{i}")
    late = admit(db_url, crm_url, f"{late_namespace}/late", "late")
    with migrate.workers(db_url, LANES, processes=0), connect.connect(db_url) as conn:
        while conn.execute(
            "SELECT count(*) AS n FROM ferryman_runs WHERE state = 'running'"
        ).fetchone() != {"n": 0}:
            conn.execute("SELECT pg_sleep(0.25)")  # polled, as a person would
        row = conn.execute(
            "SELECT extract(epoch FROM (SELECT finished_at FROM ferryman_runs WHERE id = %(late)s)"
            "  - min(claimed_at)) AS late,"
            " extract(epoch FROM (SELECT max(finished_at) FROM ferryman_runs) - min(claimed_at))"
            "  AS every,"
            " (SELECT count(*) FROM ferryman_runs WHERE state <> 'succeeded') AS failed"
            " FROM ferryman_jobs WHERE name = 'ferryman.task'",
            {"late": late},
        ).fetchone()
    assert row is not None and row["failed"] == 0, row
    return {"late": float(row["late"]), "all": float(row["every"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=50, help="team-a's runs (default 50)")
    parser.add_argument("--organizations", type=int, default=1000, help="per run (default 1000)")
    args = parser.parse_args()
    os.environ[credential_env_var(migrate.SECRET["name"], migrate.SECRET["key"])] = migrate.API_KEY
    load_before = os.getloadavg()
    rounds: dict[str, list[dict[str, float]]] = {"fair": [], "fifo": []}
    crm = migrate.democrm(organizations=args.organizations, people=0, deals=0)
    with databases.server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url, crm as (url, _):
        dbs = databases.Scratchpad(admin_url, "ferryman_fairbench")
        for n in range(args.rounds):
            for mode, namespace in (("fair", "team-b"), ("fifo", "team-a")):
                with dbs.fresh() as db_url:
                    found = one_round(db_url, url, args.runs, namespace)
                rounds[mode].append(found)
                print(f"round {n + 1} {mode}: late run {found['late']:.1f} s,"
                      f" all runs {found['all']:.1f} s", flush=True)  # fmt: skip
    print(json.dumps(summary(rounds, args, load_before)))


def summary(
    rounds: dict[str, list[dict[str, float]]], args: argparse.Namespace, load: tuple[float, ...]
) -> dict[str, Any]:
    def ratio(figure: str) -> float:
        pairs = zip(rounds["fair"], rounds["fifo"], strict=True)
        return statistics.median(fair[figure] / fifo[figure] for fair, fifo in pairs)

    return {
        "late_run_fair_vs_fifo": ratio("late"),
        "all_runs_fair_vs_fifo": ratio("all"),
        "rounds": rounds,
        "runs_of_team_a": args.runs,
        "organizations_per_run": args.organizations,
        "lanes": LANES,
        "load": (load, os.getloadavg()),
    }


if __name__ == "__main__":
    main()
