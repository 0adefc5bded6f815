#!/usr/bin/env python3
"""Where a worker's CPU goes, per row: an import of the demo CRM's organizations on a worker in
this process, with each step of the engine's hot path timed in thread CPU time (the lane
thread's own, so other processes on the machine move it little).

Prints one line per step (seconds, calls, microseconds a call and a row), then as its LAST line
one JSON object ``{step: microseconds per row}`` with ``worker_us_per_row`` (the lane thread's
whole job loop) and ``rows``. The steps nest: ``window`` holds ``validate``, ``statement`` (which
holds ``serialise``) and, for a task's last window, ``finish``; ``page`` holds ``window``,
``fetch``, ``records`` (the listing's records out of the reply) and ``to write`` (the page looked
up in the ledger, in a run of a workspace imported before). One lane thread by default, so no
step waits on the GIL of another; the heap settled as a ``ferryman worker`` process settles it.

    .venv/bin/python -P hack/bench/rowcost.py [--organizations 100000] [--lanes migrations:1]
        [--rerun]

``--rerun`` imports the organizations first, untimed, then times a second run of the same
workspace: every record is in the ledger, nothing is written (the skip path).
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import pathlib
import sys
import time
from typing import Any

from ferryman_worker.db import databases
from ferryman_worker.engine import paging, scope, tasks, walks, windows
from ferryman_worker.providers import declarative
from ferryman_worker.queue import worker

sys.path.append(str(pathlib.Path(__file__).resolve().parent))
import migrate  # hack/bench/migrate.py: the demo API and the run

STEPS = (
    (worker.Worker, "_drain", "worker"),
    (tasks, "_walk", "task"),
    (walks, "walk", "page"),
    (scope.Scope, "build", "scope"),
    (scope.Scope, "call_all", "fetch"),
    (scope.Scope, "commit_window", "window"),
    (windows, "validate", "validate"),
    (windows, "write", "statement"),
    (windows, "_rows", "serialise"),
    (scope.Scope, "finish", "finish"),
    (scope.Scope, "to_write", "to write"),
    (declarative.DeclaredProvider, "records", "records"),
    (paging, "following", "next page"),
)
"""(owner, attribute, step): the functions timed."""

spent: collections.defaultdict[str, float] = collections.defaultdict(float)
calls: collections.Counter[str] = collections.Counter()


def timed(owner: Any, name: str, step: str) -> None:
    """Replace ``owner.name`` by a wrapper adding its thread CPU time to ``step``."""
    function = getattr(owner, name)

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[step] += time.thread_time() - began
            calls[step] += 1

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--organizations", type=int, default=100_000)
    parser.add_argument("--lanes", default="migrations:1", help="the worker's lane (default 1)")
    parser.add_argument(
        "--rerun",
        action="store_true",
        help="time a second run of the imported workspace instead (it writes nothing)",
    )
    args = parser.parse_args()
    worker.settle_heap()  # as a `ferryman worker` process does before it claims
    rows = args.organizations
    with (
        databases.server(None) as admin_url,
        migrate.democrm(organizations=rows, people=0, deals=0) as (url, _),
        databases.Scratchpad(admin_url, "ferryman_rowcost").fresh() as db,
    ):
        if args.rerun:
            first = migrate.run_import(db, url, ["organizations"], lanes=args.lanes)
            assert first["rows"] == rows, first
        for owner, name, step in STEPS:
            timed(owner, name, step)
        result = migrate.run_import(
            db, url, ["organizations"], lanes=args.lanes, name="bench/again"
        )
    assert result["rows"] == (0 if args.rerun else rows), result
    for step, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        print(
            f"{step:<10} {seconds:7.3f} s  {calls[step]:6d} calls  "
            f"{seconds / calls[step] * 1e6:8.1f} us/call  {seconds / rows * 1e6:6.2f} us/row"
        )
    figures = {step: round(spent[step] / rows * 1e6, 2) for step in spent}
    print(json.dumps({"worker_us_per_row": figures.pop("worker"), **figures, "rows": rows}))


if __name__ == "__main__":
    main()
