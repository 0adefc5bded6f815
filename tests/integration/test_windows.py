"""Windows: malformed rows isolated without a ledger slot; rows the database refuses rolled
back alone; rows the ledger already holds skipped."""

from __future__ import annotations

from typing import Any

import pytest
from migration import request

from ferryman_worker.db import connect
from ferryman_worker.engine import runs, windows
from ferryman_worker.providers import load as load_provider


def _target(conn: connect.Connection, kind: str) -> windows.Target:
    run = runs.admit(conn, request("http://127.0.0.1:1"))
    provider = load_provider("democrm")
    return windows.Target(int(run["id"]), 1, "acme", provider, provider.kinds[kind])


def _write(
    conn: connect.Connection,
    target: windows.Target,
    records: list[dict[str, Any]],
    careful: bool = False,
) -> windows.Counts:
    valid, malformed = windows.validate(target.kind, records)
    with conn.transaction():
        return windows.write(conn, target, valid, malformed, careful=careful)


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
    errors = {
        r["source_id"]: r["reason"]
        for r in conn.execute("SELECT source_id, reason FROM ferryman_row_errors")
    }
    assert set(errors) == {"2", "3", "4"}
    assert "name: Field required" in errors["2"]
    assert "at most 255 characters" in errors["4"]


def test_rows_already_in_the_ledger_are_skipped_not_written_twice(conn: connect.Connection) -> None:
    target = _target(conn, "organizations")
    first = _write(conn, target, [{"id": i, "name": f"o{i}"} for i in range(1, 26)])
    overlapping = [{"id": i, "name": f"o{i}"} for i in range(20, 31)]
    with pytest.raises(windows.REFUSED):  # the ledger's key refuses the one-statement write
        _write(conn, target, overlapping)
    again = _write(conn, target, overlapping, careful=True)
    assert (first.written, again.written, again.skipped) == (25, 5, 6)
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
    people = windows.Target(orgs.run_id, 1, "acme", orgs.provider, orgs.provider.kinds["people"])
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
