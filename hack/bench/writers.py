#!/usr/bin/env python3
"""The database's CPU per row of the demo CRM's writers: the one generated from its mapping
against its hand-written PL/pgSQL writer, statement by statement, with nothing else running.

Each round writes the same windows (organizations, then people referencing them through the
ledger) with each writer into a fresh database of its own on one server, window by window in
turn (the order alternating), so a change of the machine's speed hits both alike; the CPU is
each serving backend's own (``/proc/<pid>/stat``, so the server must run on this machine: the
embedded one, or FERRYMAN_DATABASE_URL's). ``--versions`` gives every record an ``updated_at``
(the demo CRM's version field, which its listings carry once its changes are on), so the
generated writer keeps a time as each row's source version instead of none. Prints a line per
round and, last, one JSON object with the medians and ``generated_vs_handwritten_db_cpu``
(generated / hand-written, the median of the rounds' ratios).

    .venv/bin/python -P hack/bench/writers.py [--rows 100000] [--rounds 5] [--window 50]
        [--versions] [--explain]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import sys
from typing import Any

from psycopg.types.json import Jsonb

from ferryman_worker import destinations
from ferryman_worker.db import connect, databases
from ferryman_worker.providers import load as load_provider

sys.path.append(str(pathlib.Path(__file__).resolve().parent))
import meter

KINDS = ("organizations", "people")


def records(kind: str, count: int, versions: bool = False) -> list[dict[str, Any]]:
    if kind == "organizations":
        rows = [
            {
                "id": i,
                "name": f"Organization {i}",
                "domain": f"org{i}.example",
                "created_at": "2024-01-02T03:04:05Z",
            }
            for i in range(1, count + 1)
        ]
    else:
        rows = [
            {"id": i, "org_id": i, "name": f"Person {i}", "email": f"p{i}@x.example", "phone": None}
            for i in range(1, count + 1)
        ]
    if versions:
        for i, row in enumerate(rows):
            row["updated_at"] = f"2024-03-04T05:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z"
    return rows


def statements(conn: connect.Connection, how: str) -> dict[str, bytes]:
    provider = load_provider("democrm")
    if how == "handwritten":
        run: dict[str, Any] = {}
    else:
        mapping = destinations.builtin("democrm")
        assert mapping is not None
        run = {"mapping": destinations.snapshot(conn, mapping, list(KINDS))}
    return {k: destinations.writer_for(run, provider, k).rows_statement() for k in KINDS}


def _backend(conn: connect.Connection) -> int:
    row = conn.execute("SELECT pg_backend_pid() AS p").fetchone()
    assert row is not None
    return int(row["p"])


def round_(
    dbs: databases.Scratchpad, data: dict[str, list[dict[str, Any]]], window: int, first: str
) -> dict[str, dict[str, float]]:
    """One round: each writer in a fresh database of its own, the windows written in turn
    (``first``'s first); returns each writer's backend CPU seconds per kind."""
    order = ("handwritten", "generated") if first == "handwritten" else ("generated", "handwritten")
    with contextlib.ExitStack() as stack:
        conns = {
            how: stack.enter_context(connect.connect(stack.enter_context(dbs.fresh())))
            for how in order
        }
        written = {how: statements(conn, how) for how, conn in conns.items()}
        pids = {how: _backend(conn) for how, conn in conns.items()}
        cursors = {how: conn.cursor() for how, conn in conns.items()}
        result: dict[str, dict[str, float]] = {how: {} for how in order}
        for kind in KINDS:
            rows = data[kind]
            spent = {how: meter.proc_cpu(pid) for how, pid in pids.items()}
            for start in range(0, len(rows), window):
                params = {
                    "rows": Jsonb(rows[start : start + window]),
                    "workspace": "bench",
                    "kind": kind,
                    "run_id": 1,
                }
                for how in order if start // window % 2 == 0 else order[::-1]:
                    cursors[how].execute(written[how][kind], params, binary=True)
            for how, pid in pids.items():
                result[how][kind] = meter.proc_cpu(pid) - spent[how]
        return result


def explain(db: str, how: str, window: int, versions: bool) -> None:
    """EXPLAIN ANALYZE of one window of each kind, after a warm-up."""
    with connect.connect(db) as conn:
        written = statements(conn, how)
        for kind in KINDS:
            rows = records(kind, 2 * window, versions)
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
    parser.add_argument(
        "--versions", action="store_true", help="records carry updated_at, the version field"
    )
    parser.add_argument("--explain", action="store_true", help="show the plans, measure nothing")
    args = parser.parse_args()
    data = {kind: records(kind, args.rows, args.versions) for kind in KINDS}
    with databases.server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url:
        dbs = databases.Scratchpad(admin_url, "ferryman_writerbench")
        if args.explain:
            for how in ("handwritten", "generated"):
                with dbs.fresh() as db:
                    explain(db, how, args.window, args.versions)
            return
        cpu: dict[str, list[float]] = {"handwritten": [], "generated": []}
        for number in range(args.rounds):
            first = "handwritten" if number % 2 == 0 else "generated"
            for how, spent in round_(dbs, data, args.window, first).items():
                cpu[how].append(sum(spent.values()))
                each = ", ".join(f"{kind} {cpu_s:.2f} s" for kind, cpu_s in spent.items())
                print(
                    f"round {number + 1} {how:<11} db cpu {cpu[how][-1]:.2f} s ({each})",
                    flush=True,
                )
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
                "versions": args.versions,
                "load_avg_1min": os.getloadavg()[0],
            }
        )
    )


if __name__ == "__main__":
    main()
