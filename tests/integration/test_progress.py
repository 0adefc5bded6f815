"""Per-kind progress: the active time of a kind excludes the pauses of a suspended run."""

from __future__ import annotations

import datetime

from migration import request

from ferryman_worker.db import connect
from ferryman_worker.engine import runs

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _task(
    conn: connect.Connection,
    run_id: int,
    key: str,
    status: str,
    claimed: float | None,
    finished: float | None = None,
    beat: float | None = None,
) -> None:
    def at(seconds: float | None) -> datetime.datetime | None:
        return None if seconds is None else T0 + datetime.timedelta(seconds=seconds)

    conn.execute(
        "INSERT INTO ferryman_tasks (run_id, phase, kind, cursor_key, cursor, status,"
        " claimed_at, finished_at, heartbeat_at, rows_written)"
        " VALUES (%s, 0, 'organizations', %s, '{}', %s, %s, %s, %s, 100)",
        (run_id, key, status, at(claimed), at(finished), at(beat)),
    )


def test_active_seconds_are_the_union_of_task_spans_without_the_pause(
    conn: connect.Connection,
) -> None:
    run = runs.admit(conn, request("http://127.0.0.1:1"))
    # two overlapping tasks 0-10 and 5-20; one stopped by a suspension at its checkpoint (25),
    # then the run paused until 100; after resuming, tasks 100-130 and 120-140; one never claimed
    _task(conn, run["id"], "a", "done", 0, 10)
    _task(conn, run["id"], "b", "done", 5, 20)
    _task(conn, run["id"], "c", "pending", 18, beat=25)
    _task(conn, run["id"], "d", "done", 100, 130)
    _task(conn, run["id"], "e", "done", 120, 140)
    _task(conn, run["id"], "f", "pending", None)
    (row,) = runs.kind_progress(conn, run["id"])
    assert row["active_seconds"] == 25 + 40
    assert (row["tasks"], row["done"], row["written"]) == (6, 4, 600)
