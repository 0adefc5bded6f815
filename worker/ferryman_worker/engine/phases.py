"""Phases: the unit of ordering.

A phase closes at a fenced barrier: the finishing task that finds no open task left in the
phase moves ``ferryman_runs.phase`` on with a compare-and-set, and that single winner seeds the
next phase. Finishing tasks of one run lock the run row first, so the barrier's check sees every
other finisher's commit. Nothing is queued for a phase before it opens: top-up (``schedule``)
only queues tasks of the run's open phase.

Before it advances, the barrier judges the closing phase's kinds (``verdicts``): a kind whose
listing falls short of what the source said it holds, or too many of whose records were refused,
fails the run there.

Seeding refused for good (``db.sqlstate.permanent``: a revoked privilege, a constraint, a bad
value) raises ``SeedingRefused``, naming the phase: the finishing task fails its run at once.
Any other error (a lost connection, a deadlock, a restart) rolls the barrier back with the
finishing task's last window, and the task's job tries again.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ferryman_worker.db import queries, sqlstate
from ferryman_worker.db.connect import Connection
from ferryman_worker.engine import paging, verdicts
from ferryman_worker.errors import SeedingRefused
from ferryman_worker.providers import Kind, Provider


def seed_phase(conn: Connection, run: dict[str, Any], provider: Provider, phase: int) -> int:
    """Create the tasks of ``phase``; returns how many exist for it now."""
    options = run["options"]
    for name in run["phases"][phase]:
        kind = provider.kinds[name]
        if kind.walk == "pages":
            size = paging.page_size(options, kind)
            _seed_pages(conn, run["id"], phase, kind, options["stripes"], size)
        else:
            conn.execute(
                queries.engine("seed_tree_tasks"),
                {
                    "run_id": run["id"],
                    "phase": phase,
                    "kind": name,
                    "workspace": run["workspace"],
                    "parent_kind": kind.parent,
                    "per_task": options["parents_per_task"],
                },
            )
    return open_tasks(conn, run["id"], phase)


def _seed_pages(
    conn: Connection, run_id: int, phase: int, kind: Kind, stripes: int, page_size: int
) -> None:
    """The first task of each chain: per part of the kind's split, ``stripes`` stripes where
    its pagination knows page tokens ahead, else one chain."""
    per_part = stripes if kind.pagination.striped else 1
    starts = [
        paging.Position.start(kind, part, stripe, page_size)
        for part in range(len(kind.split.parts))
        for stripe in range(per_part)
    ]
    seed_tasks(conn, run_id, phase, [(kind.name, at.key(kind), at.cursor()) for at in starts])


def seed_tasks(
    conn: Connection, run_id: int, phase: int, tasks: list[tuple[str, str, dict[str, Any]]]
) -> None:
    """Insert (kind, cursor_key, cursor) tasks; existing cursor keys are left alone."""
    conn.execute(
        queries.engine("seed_tasks"),
        {
            "run_id": run_id,
            "phase": phase,
            "kinds": [kind for kind, _, _ in tasks],
            "cursor_keys": [key for _, key, _ in tasks],
            "cursors": [Jsonb(cursor) for _, _, cursor in tasks],
        },
    )


def open_tasks(conn: Connection, run_id: int, phase: int) -> int:
    row = conn.execute(
        queries.engine("open_tasks_in_phase"), {"run_id": run_id, "phase": phase}
    ).fetchone()
    return int(row["n"]) if row else 0


def close_if_done(conn: Connection, run: dict[str, Any], provider: Provider) -> None:
    """The barrier. Call with the run row locked, in the finishing task's transaction: while the
    open phase has no open task, judge its kinds (``verdicts``: a kind short of the source's
    total, or too many of whose records were refused, fails the run), then advance (one
    winner) and seed the next, or succeed the run."""
    phase = int(run["phase"])
    while open_tasks(conn, run["id"], phase) == 0:
        failure = verdicts.judge(conn, run, provider, phase)
        if failure is not None:
            params = {"run_id": run["id"], "state": "failed", "error": failure[:2000]}
            conn.execute(queries.engine("finish_run"), params)
            return
        if phase + 1 >= len(run["phases"]):
            conn.execute(
                queries.engine("finish_run"),
                {"run_id": run["id"], "state": "succeeded", "error": None},
            )
            return
        advanced = conn.execute(
            queries.engine("advance_phase"), {"run_id": run["id"], "phase": phase}
        ).fetchone()
        if advanced is None:
            return  # someone else closed it: not us
        phase = int(advanced["phase"])
        _seed_next(conn, run, provider, phase)


def _seed_next(conn: Connection, run: dict[str, Any], provider: Provider, phase: int) -> None:
    """``seed_phase`` at the barrier; SeedingRefused if the database refuses it for good."""
    try:
        seed_phase(conn, run, provider, phase)
    except psycopg.Error as exc:
        if not sqlstate.permanent(exc):
            raise
        raise SeedingRefused(phase, run["phases"][phase], sqlstate.describe(exc)) from exc
