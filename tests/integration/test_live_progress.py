"""One read of every live run (``contract.live_progress``, the operator's refresh): each run's
aggregate, "retrying" line and ETA as the run's own reads show them, in a number of statements
that does not grow with the number of runs."""

from __future__ import annotations

import datetime
from typing import Any

import psycopg
from migration import request

from ferryman_worker import contract
from ferryman_worker.db import connect
from ferryman_worker.engine import runs

NOW = datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.UTC)
KINDS = ["organizations", "people"]


class Counted:
    """Counts the statements sent through a connection (its cursor class)."""

    def __init__(self, conn: connect.Connection) -> None:
        self.statements = 0
        counter = self

        class Cursor(psycopg.Cursor[Any]):
            def execute(self, *args: Any, **kwargs: Any) -> Any:
                counter.statements += 1
                return super().execute(*args, **kwargs)

        conn.cursor_factory = Cursor


def _runs(conn: connect.Connection, count: int) -> list[str]:
    """``count`` started runs, each in a state of its own (by its number modulo 4): tasks
    working, one of them retrying after a failed attempt; suspended; cancelled; just started."""
    names = []
    for number in range(count):
        name = f"team/run-{number}"
        run = runs.admit(
            conn, request("http://127.0.0.1:1", name=name, workspace=f"w{number}", kinds=KINDS)
        )
        runs.start(conn, run)
        names.append(name)
        if number % 4 == 0:
            _working(conn, int(run["id"]), seconds=10 + number * 5)
        elif number % 4 == 1:
            runs.suspend(conn, int(run["id"]))
        elif number % 4 == 2:
            runs.cancel(conn, int(run["id"]))
    return names


def _working(conn: connect.Connection, run_id: int, seconds: int) -> None:
    """One task done ``seconds`` after its claim, one working for 10 s whose job failed once."""
    tasks = conn.execute(
        "SELECT t.id, j.id AS job_id FROM ferryman_tasks t"
        " JOIN ferryman_jobs j ON (j.args ->> 0)::bigint = t.id"
        " WHERE t.run_id = %s ORDER BY t.id LIMIT 2",
        (run_id,),
    ).fetchall()
    done, failing = tasks[0], tasks[1]
    conn.execute(
        "UPDATE ferryman_tasks SET status = 'done', finished_at = now() - interval '10 s',"
        " claimed_at = now() - interval '10 s' - make_interval(secs => %s), rows_written = %s"
        " WHERE id = %s",
        (seconds, seconds * 2, done["id"]),
    )
    conn.execute(
        "UPDATE ferryman_tasks SET status = 'running', job_id = %s,"
        " claimed_at = now() - interval '10 s' WHERE id = %s",
        (failing["job_id"], failing["id"]),
    )
    conn.execute(
        "UPDATE ferryman_jobs SET status = 'ready', attempts = 1, last_error = 'HTTP 503',"
        " run_at = now() + interval '5 s' WHERE id = %s",
        (failing["job_id"],),
    )


def _alone(conn: connect.Connection, name: str) -> contract.LiveRun:
    """What the run's own reads show (the operator's per-run visit)."""
    (progress,) = contract.progress(conn, name)
    running = progress.state is contract.RunState.RUNNING
    return contract.LiveRun(
        progress,
        contract.retrying(conn, progress.id, NOW) if running else None,
        contract.eta(conn, progress.id) if running else None,
    )


def test_one_read_shows_each_run_as_its_own_reads_do(conn: connect.Connection) -> None:
    names = _runs(conn, 8)
    with conn.transaction():  # one now() for both reads: a running task's time is the same
        found = contract.live_progress(conn, [*names, "team/never-admitted"], NOW)
        alone = {name: _alone(conn, name) for name in names}
    assert sorted(found) == sorted(names)  # a name with no run is left out
    for name in names:
        assert found[name] == alone[name], name
    retrying = [name for name in names if found[name].retrying]
    assert retrying == ["team/run-0", "team/run-4"]
    shown = found["team/run-0"].retrying
    assert shown is not None and "HTTP 503" in shown.line
    assert shown.cause is None  # a 5xx: trying again may mend it, the run names no cause
    assert found["team/run-0"].eta is not None and found["team/run-1"].eta is None
    assert found["team/run-0"].eta != found["team/run-4"].eta  # each its own
    assert found["team/run-2"].progress.state is contract.RunState.CANCELLED


def test_the_statements_of_one_read_do_not_grow_with_the_runs(conn: connect.Connection) -> None:
    names = _runs(conn, 12)
    counted = Counted(conn)
    contract.live_progress(conn, names[:1], NOW)
    one = counted.statements
    counted.statements = 0
    contract.live_progress(conn, names, NOW)
    assert (one, counted.statements) == (4, 4)
