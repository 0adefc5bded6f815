"""The reaper repairs each stall it exists for, and changes nothing when nothing is stalled."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from migration import request
from psycopg.types.json import Jsonb

from ferryman_worker.db import connect, queries
from ferryman_worker.engine import runs, windows
from ferryman_worker.reaper import reap, sweep_engine
from ferryman_worker.settings import Settings


def _started(conn: connect.Connection) -> dict[str, Any]:
    run = runs.admit(conn, request("http://127.0.0.1:1"))
    runs.start(conn, run)
    return run


def _tasks(conn: connect.Connection) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT id, phase, status, job_id FROM ferryman_tasks ORDER BY id"
    ).fetchall()


def _jobs(conn: connect.Connection) -> int:
    row = conn.execute("SELECT count(*) AS n FROM ferryman_jobs WHERE status = 'ready'").fetchone()
    return int(row["n"]) if row else 0


def test_nothing_stalled_means_nothing_done(conn: connect.Connection) -> None:
    _started(conn)
    lines = reap(conn, Settings())
    assert lines[:5] == [
        "dead or stale task claims: 0 task(s) released",
        "runs whose heartbeat stopped: 0 run(s) requeued",
        "failed tasks: 0 run(s) marked failed",
        "phases closed without a winner: 0 run(s) advanced",
        "runs below their in-flight limit: 0 run(s) refilled, 0 task(s) queued",
    ]


def test_a_dead_claim_is_released_and_the_task_queued_again(conn: connect.Connection) -> None:
    _started(conn)
    first = _tasks(conn)[0]["id"]
    # its job's worker died: the task says running, but nobody holds job 999's lock
    conn.execute(
        "UPDATE ferryman_tasks SET status = 'running', job_id = 999 WHERE id = %s", (first,)
    )
    sweeps = sweep_engine(conn, stale_after=1800)
    assert (sweeps.released, sweeps.queued) == (1, 1)
    assert _tasks(conn)[0]["status"] == "queued"
    assert sweep_engine(conn, stale_after=1800).released == 0


def test_a_live_claim_is_kept_until_it_is_stale_then_fenced_out(
    db_url: str, conn: connect.Connection
) -> None:
    _started(conn)
    first = _tasks(conn)[0]["id"]
    with connect.connect(db_url) as claimer:
        claimer.execute("SELECT pg_advisory_lock(4242::bigint)")  # job 4242 is alive
        conn.execute(
            "UPDATE ferryman_tasks SET status = 'running', job_id = 4242,"
            " heartbeat_at = now() WHERE id = %s",
            (first,),
        )
        assert sweep_engine(conn, stale_after=1800).released == 0
        conn.execute(
            "UPDATE ferryman_tasks SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
            (first,),
        )
        assert sweep_engine(conn, stale_after=1800).released == 1
        with pytest.raises(psycopg.Error) as refused:  # the stale claimer's next window
            claimer.execute(
                queries.get("close_window", "engine.sql"),
                {
                    "task_id": first,
                    "job_id": 4242,
                    "run_id": 1,
                    "kind": "organizations",
                    "offset": 25,
                    "written": 25,
                    "skipped": 0,
                    "errors": Jsonb([]),
                },
            )
    assert refused.value.sqlstate == windows.GATE_CLOSED  # the task is no longer its own


def test_a_run_below_its_in_flight_limit_is_refilled(conn: connect.Connection) -> None:
    _started(conn)
    # the enqueue was lost: tasks pending, no jobs
    conn.execute("UPDATE ferryman_tasks SET status = 'pending'")
    conn.execute("DELETE FROM ferryman_jobs")
    sweeps = sweep_engine(conn, stale_after=1800)
    assert (sweeps.refilled_runs, sweeps.queued) == (1, 4)
    assert _jobs(conn) == 4
    assert {t["status"] for t in _tasks(conn)} == {"queued"}


def test_a_phase_closed_without_a_winner_is_advanced(conn: connect.Connection) -> None:
    run = _started(conn)
    conn.execute("UPDATE ferryman_tasks SET status = 'done'")  # the barrier's winner died
    sweeps = sweep_engine(conn, stale_after=1800)
    assert sweeps.advanced == 1
    assert runs.lock(conn, run["id"])["phase"] == 1
    people = [t for t in _tasks(conn) if t["phase"] == 1]
    assert len(people) == 4 and {t["status"] for t in people} == {"queued"}


def test_the_last_phase_closed_without_a_winner_finishes_the_run(conn: connect.Connection) -> None:
    run = _started(conn)
    conn.execute("UPDATE ferryman_runs SET phase = 3")
    conn.execute("UPDATE ferryman_tasks SET status = 'done'")
    assert sweep_engine(conn, stale_after=1800).advanced == 1
    assert runs.lock(conn, run["id"])["state"] == "succeeded"


def test_a_run_whose_heartbeat_stopped_gets_its_queued_tasks_new_jobs(
    conn: connect.Connection,
) -> None:
    run = _started(conn)
    conn.execute("DELETE FROM ferryman_jobs")  # its queued tasks' jobs are gone
    assert sweep_engine(conn, stale_after=1800).stalled_runs == 0  # not yet: it may be busy
    conn.execute("UPDATE ferryman_runs SET heartbeat_at = now() - interval '1 hour'")
    sweeps = sweep_engine(conn, stale_after=1800)
    assert (sweeps.stalled_runs, sweeps.queued) == (1, 4)
    assert _jobs(conn) == 4 and {t["status"] for t in _tasks(conn)} == {"queued"}
    assert runs.lock(conn, run["id"])["heartbeat_at"] is not None
    assert sweep_engine(conn, stale_after=1800).stalled_runs == 0  # the heartbeat was renewed


def test_a_run_whose_failed_task_did_not_fail_it_is_failed(conn: connect.Connection) -> None:
    run = _started(conn)
    conn.execute(
        "UPDATE ferryman_tasks SET status = 'failed', error = 'HTTP 401'"
        " WHERE id = (SELECT min(id) FROM ferryman_tasks)"
    )
    assert sweep_engine(conn, stale_after=1800).failed_runs == 1
    final = runs.lock(conn, run["id"])
    assert final["state"] == "failed" and "HTTP 401" in final["error"]
