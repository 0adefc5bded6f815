"""Windows: malformed rows isolated without a ledger slot; rows the database refuses rolled
back alone; rows the ledger already holds skipped; the checkpoint and the gate in the same
statement."""

from __future__ import annotations

from typing import Any

import pytest
from migration import request
from psycopg.rows import tuple_row

from ferryman_worker import destinations
from ferryman_worker.db import connect
from ferryman_worker.engine import runs, windows
from ferryman_worker.providers import load as load_provider

JOB = 7


def _target(conn: connect.Connection, kind: str) -> windows.Target:
    """A target whose task is running, claimed by job JOB."""
    run = runs.admit(conn, request("http://127.0.0.1:1"))
    task = conn.execute(
        "INSERT INTO ferryman_tasks (run_id, phase, kind, cursor_key, cursor, status, job_id)"
        " VALUES (%s, 0, %s, 'k', '{}', 'running', %s) RETURNING id",
        (run["id"], kind, JOB),
    ).fetchone()
    assert task is not None
    return _for_kind(int(run["id"]), int(task["id"]), kind)


def _for_kind(run_id: int, task_id: int, kind: str) -> windows.Target:
    provider = load_provider("democrm")
    writer = destinations.writer_for({}, provider, kind)
    return windows.Target(run_id, task_id, JOB, "acme", provider.kinds[kind], writer)


def _write(
    conn: connect.Connection,
    target: windows.Target,
    records: list[dict[str, Any]],
    careful: bool = False,
    offset: int = 0,
) -> windows.Counts:
    valid, malformed = windows.validate(target.kind, records)
    window = windows.Window(offset, valid, malformed)
    cur = conn.cursor(row_factory=tuple_row)
    if not careful:
        return windows.write(cur, target, window)  # one statement, its own commit
    with conn.transaction():
        return windows.write_carefully(cur, target, window)


def _task(conn: connect.Connection, target: windows.Target) -> dict[str, Any]:
    row = conn.execute(
        "SELECT processed_offset, rows_written, rows_skipped, rows_failed FROM ferryman_tasks"
        " WHERE id = %s",
        (target.task_id,),
    ).fetchone()
    assert row is not None
    return dict(row)


def _ledger(conn: connect.Connection) -> list[str]:
    return [
        r["source_id"]
        for r in conn.execute("SELECT source_id FROM ferryman_ledger ORDER BY source_id::bigint")
    ]


def test_malformed_records_are_recorded_and_claim_no_ledger_slot(conn: connect.Connection) -> None:
    target = _target(conn, "organizations")
    counts = _write(
        conn,
        target,
        [
            {"id": 1, "name": "Acme"},
            {"id": 2},  # required field missing
            {"id": 3, "name": 12345},  # wrong type
            {"id": 4, "name": "x" * 300},  # over-long
            {"id": 5, "name": "Globex", "domain": "globex.test"},
        ],
    )
    assert (counts.written, counts.skipped, counts.failed) == (2, 0, 3)
    assert _ledger(conn) == ["1", "5"]
    assert _task(conn, target) == {
        "processed_offset": 0,
        "rows_written": 2,
        "rows_skipped": 0,
        "rows_failed": 3,
    }
    errors = {
        r["source_id"]: r["reason"]
        for r in conn.execute("SELECT source_id, reason FROM ferryman_row_errors")
    }
    assert set(errors) == {"2", "3", "4"}
    assert "name: Field required" in errors["2"]
    assert "at most 255 characters" in errors["4"]


def test_rows_already_in_the_ledger_are_skipped_not_written_twice(conn: connect.Connection) -> None:
    target = _target(conn, "organizations")
    first = _write(conn, target, [{"id": i, "name": f"o{i}"} for i in range(1, 26)], offset=25)
    overlapping = [{"id": i, "name": f"o{i}"} for i in range(20, 31)]
    with pytest.raises(windows.REFUSED):  # the ledger's key refuses the one-statement write
        _write(conn, target, overlapping, offset=36)
    assert _task(conn, target)["processed_offset"] == 25  # the refused window left no trace
    again = _write(conn, target, overlapping, careful=True, offset=36)
    assert (first.written, again.written, again.skipped) == (25, 5, 6)
    assert _task(conn, target) == {
        "processed_offset": 36,
        "rows_written": 30,
        "rows_skipped": 6,
        "rows_failed": 0,
    }
    row = conn.execute(
        "SELECT count(*) AS n, count(DISTINCT source_id) AS d FROM crm_organizations"
    ).fetchone()
    assert row is not None and row["n"] == row["d"] == 30


def test_a_row_the_database_refuses_fails_the_fast_path_then_goes_alone(
    conn: connect.Connection,
) -> None:
    target = _target(conn, "deals")
    records = [{"id": i, "title": f"deal {i}", "value": 10.5} for i in range(1, 6)]
    records[2]["value"] = 1e20  # the model takes it; numeric(14, 2) does not
    with pytest.raises(windows.REFUSED):
        _write(conn, target, records)
    assert _ledger(conn) == []  # the whole window rolled back
    counts = _write(conn, target, records, careful=True)
    assert (counts.written, counts.failed) == (4, 1)
    assert _ledger(conn) == ["1", "2", "4", "5"]
    reason = conn.execute("SELECT reason FROM ferryman_row_errors WHERE source_id = '3'").fetchone()
    assert reason is not None and "database refused the row" in reason["reason"]


def test_foreign_keys_resolve_through_the_ledger(conn: connect.Connection) -> None:
    orgs = _target(conn, "organizations")
    _write(conn, orgs, [{"id": 7, "name": "Acme"}])
    people = _for_kind(orgs.run_id, orgs.task_id, "people")
    _write(
        conn,
        people,
        [{"id": 70, "org_id": 7, "name": "Ann"}, {"id": 71, "org_id": 999, "name": "Bob"}],
    )
    rows = conn.execute(
        "SELECT p.source_id, o.source_id AS org FROM crm_people p"
        " LEFT JOIN crm_organizations o ON o.id = p.organization_id"
        " ORDER BY p.source_id"
    ).fetchall()
    assert [(r["source_id"], r["org"]) for r in rows] == [(70, 7), (71, None)]


@pytest.mark.parametrize("change", ["suspend", "cancel", "claim lost"])
def test_the_gate_refuses_the_whole_window(conn: connect.Connection, change: str) -> None:
    target = _target(conn, "organizations")
    _write(conn, target, [{"id": 1, "name": "Acme"}], offset=1)
    statement = {
        "suspend": "UPDATE ferryman_runs SET suspended = true",
        "cancel": "UPDATE ferryman_runs SET state = 'cancelled'",
        "claim lost": "UPDATE ferryman_tasks SET job_id = 8",
    }[change]
    conn.execute(statement)  # type: ignore[arg-type]
    with pytest.raises(windows.Closed):
        _write(conn, target, [{"id": 2, "name": "Globex"}, {"id": 3}], offset=3)
    with pytest.raises(windows.Closed):
        _write(conn, target, [{"id": 2, "name": "Globex"}, {"id": 3}], careful=True, offset=3)
    assert _ledger(conn) == ["1"]
    assert conn.execute("SELECT count(*) AS n FROM ferryman_row_errors").fetchone() == {"n": 0}
    assert _task(conn, target)["processed_offset"] == 1
