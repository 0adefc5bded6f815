"""The ledger's lookups by source id read only the entries they ask for, whatever the ledger's
statistics say. A run grows the ledger by thousands of rows faster than autovacuum analyses
it; a lookup the planner may turn into a scan of the kind's whole range (``source_id =
ANY(...)`` as a filter) costs a window more the larger its kind, and a re-run of 20,000 records
took six times its import before the lookups became one probe of the key per id."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg.types.json import Jsonb

from ferryman_worker.db import connect, queries

KIND_SIZE = 20_000
ASKED = [str(i) for i in range(100, 150)]


def ledger_entries_read(conn: connect.Connection, query: str, params: dict[str, Any]) -> int:
    """Entries of ferryman_ledger the statement's plan read (returned or filtered out; a node
    run in a loop states its rows per loop, rounded: one probe of one id counts as at most
    one entry)."""
    row = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {query}", params).fetchone()
    assert row is not None
    return _read(row["QUERY PLAN"][0]["Plan"])


def _read(node: dict[str, Any]) -> int:
    read = 0
    if node.get("Relation Name") == "ferryman_ledger":
        loops = node["Actual Loops"]
        read = (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * loops
    return read + sum(_read(child) for child in node.get("Plans", []))


@pytest.fixture
def grown_ledger(conn: connect.Connection) -> connect.Connection:
    """A ledger a run has just grown: one kind of 20,000 entries, never analysed. The entries
    are inserted here (a run writing them would take the test a minute, and the planner sees
    the same table either way); autovacuum is off for the table so that no analysis comes in
    between, as none does during a run's first minutes."""
    conn.execute("ALTER TABLE ferryman_ledger SET (autovacuum_enabled = false)")
    conn.execute(
        "INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)"
        " SELECT 'acme', 'organizations', i::text, i, 1 FROM generate_series(1, %s) AS i",
        (KIND_SIZE,),
    )
    return conn


NEW = ["new-1", "new-2"]
"""Ids the ledger does not hold."""


@pytest.mark.parametrize("name", ["ledger_written", "delta_renewed_parents"])
def test_a_lookup_by_source_id_reads_only_the_entries_asked_for(
    grown_ledger: connect.Connection, name: str
) -> None:
    params = {"workspace": "acme", "kind": "organizations", "source_ids": ASKED + NEW, "run_id": 1}
    found = grown_ledger.execute(queries.engine(name), params).fetchall()
    assert sorted(row["source_id"] for row in found) == sorted(ASKED)
    assert ledger_entries_read(grown_ledger, queries.engine(name), params) <= len(ASKED + NEW)


def test_the_ids_still_to_write_are_found_reading_only_the_entries_asked_for(
    grown_ledger: connect.Connection,
) -> None:
    query = queries.engine("ledger_unwritten")
    params = {"workspace": "acme", "kind": "organizations", "source_ids": Jsonb(ASKED + NEW)}
    found = grown_ledger.execute(query, params).fetchall()
    assert sorted(row["source_id"] for row in found) == NEW
    assert ledger_entries_read(grown_ledger, query, params) <= len(ASKED + NEW)


def test_a_lookup_of_no_ids_reads_nothing(grown_ledger: connect.Connection) -> None:
    params = {"workspace": "acme", "kind": "organizations", "source_ids": [], "run_id": 1}
    assert ledger_entries_read(grown_ledger, queries.engine("ledger_written"), params) == 0
