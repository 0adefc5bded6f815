#!/usr/bin/env python3
"""The database's CPU per row of the demo CRM's writers: the one generated from its mapping
against its hand-written PL/pgSQL writer, statement by statement, with nothing else running.

Each round writes the same windows (organizations, then people referencing them through the
ledger) with each writer into a fresh database of one server, the order alternating; the CPU is
the serving backend's own (``/proc/<pid>/stat``, so the server must run on this machine: the
embedded one, or FERRYMAN_DATABASE_URL's). Prints a line per round and, last, one JSON object
with the medians and ``generated_vs_handwritten_db_cpu`` (generated / hand-written).

    .venv/bin/python -P hack/bench/writers.py [--rows 100000] [--rounds 5] [--window 50]
        [--explain]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time
from typing import Any

from psycopg.types.json import Jsonb

from ferryman_worker import destinations
from ferryman_worker.db import connect, databases
from ferryman_worker.providers import load as load_provider

sys.path.append(str(pathlib.Path(__file__).resolve().parent))
import meter

KINDS = ("organizations", "people")


def records(kind: str, count: int) -> list[dict[str, Any]]:
    if kind == "organizations":
        return [
            {
                "id": i,
                "name": f"Organization {i}",
                "domain": f"org{i}.example",
                "created_at": "2024-01-02T03:04:05Z",
            }
            for i in range(1, count + 1)
        ]
    return [
        {"id": i, "org_id": i, "name": f"Person {i}", "email": f"p{i}@x.example", "phone": None}
        for i in range(1, count + 1)
    ]


def statements(conn: connect.Connection, how: str) -> dict[str, bytes]:
    provider = load_provider("democrm")
    if how == "handwritten":
        run: dict[str, Any] = {}
    else:
        mapping = destinations.builtin("democrm")
        assert mapping is not None
        run = {"mapping": destinations.snapshot(conn, mapping, list(KINDS))}
    return {k: destinations.writer_for(run, provider, k).rows_statement() for k in KINDS}


def one(db: str, how: str, data: dict[str, list[dict[str, Any]]], window: int) -> dict[str, Any]:
    """Writes every window; returns the backend's CPU seconds and the wall seconds per kind."""
    with connect.connect(db) as conn:
        written = statements(conn, how)
        pid = int(conn.execute("SELECT pg_backend_pid() AS p").fetchone()["p"])  # type: ignore[index]
        cur = conn.cursor()
        result: dict[str, Any] = {}
        for kind in KINDS:
            rows = data[kind]
            spent, began = meter.proc_cpu(pid), time.perf_counter()
            for start in range(0, len(rows), window):
                params = {
                    "rows": Jsonb(rows[start : start + window]),
                    "workspace": "bench",
                    "kind": kind,
                    "run_id": 1,
                }
                cur.execute(written[kind], params, binary=True)
            result[kind] = {
                "cpu_s": meter.proc_cpu(pid) - spent,
                "wall_s": time.perf_counter() - began,
            }
        return result


def explain(db: str, how: str, window: int) -> None:
    """EXPLAIN ANALYZE of one window of each kind, after a warm-up."""
    with connect.connect(db) as conn:
        written = statements(conn, how)
        for kind in KINDS:
            rows = records(kind, 2 * window)
            for part in (rows[:window], rows[window:]):
                params = {"rows": Jsonb(part), "workspace": "bench", "kind": kind, "run_id": 1}
                plan = conn.execute(
                    b"EXPLAIN (ANALYZE, VERBOSE, COSTS OFF) " + written[kind], params
                ).fetchall()
            print(f"--- {how} {kind}")
            print("\n".join(row["QUERY PLAN"] for row in plan))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows of each kind")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--explain", action="store_true", help="show the plans, measure nothing")
    args = parser.parse_args()
    data = {kind: records(kind, args.rows) for kind in KINDS}
    with databases.server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url:
        dbs = databases.Scratchpad(admin_url, "ferryman_writerbench")
        if args.explain:
            for how in ("handwritten", "generated"):
                with dbs.fresh() as db:
                    explain(db, how, args.window)
            return
        cpu: dict[str, list[float]] = {"handwritten": [], "generated": []}
        for round_ in range(args.rounds):
            order = (
                ("handwritten", "generated") if round_ % 2 == 0 else ("generated", "handwritten")
            )
            for how in order:
                with dbs.fresh() as db:
                    result = one(db, how, data, args.window)
                total = sum(r["cpu_s"] for r in result.values())
                cpu[how].append(total)
                each = ", ".join(f"{k} {r['cpu_s']:.2f} s" for k, r in result.items())
                print(f"round {round_ + 1} {how:<11} db cpu {total:.2f} s ({each})", flush=True)
    ratios = [g / h for g, h in zip(cpu["generated"], cpu["handwritten"], strict=True)]
    rows = args.rows * len(KINDS)
    print(
        json.dumps(
            {
                "handwritten_db_cpu_ms_per_1000_rows": round(
                    1000 * statistics.median(cpu["handwritten"]) / rows * 1000, 2
                ),
                "generated_db_cpu_ms_per_1000_rows": round(
                    1000 * statistics.median(cpu["generated"]) / rows * 1000, 2
                ),
                "generated_vs_handwritten_db_cpu": round(statistics.median(ratios), 3),
                "rounds": args.rounds,
            }
        )
    )


if __name__ == "__main__":
    main()
