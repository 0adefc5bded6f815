"""A run of a workspace whose records the ledger already holds (a re-run, a retried task, a run
resumed after a crash) skips them a window at a time: each window stays one statement, never one
savepoint per record, and every record is counted as skipped, none written twice."""

from __future__ import annotations

from migration import credential, engine_worker, request, start_run, wait_finished
from tests.democrm.server_fixture import DemoCRM
from workers import scalar

from ferryman_worker.db import connect

ORGANIZATIONS = 1200


def next_transaction_id(db_url: str) -> int:
    """The id the next transaction that writes will take (reading it assigns none). Every
    savepoint that writes takes one of its own."""
    return int(scalar(db_url, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"))


def test_a_rerun_skips_each_window_whole_and_writes_nothing(db_url: str) -> None:
    with (
        DemoCRM.start(seed=5, organizations=ORGANIZATIONS, people=0, deals=0) as crm,
        credential(crm.api_key),
        engine_worker(db_url),
    ):
        first = wait_finished(db_url, start_run(db_url, request(crm.url, "first")))
        before = next_transaction_id(db_url)
        again = wait_finished(db_url, start_run(db_url, request(crm.url, "again")))
        after = next_transaction_id(db_url)
    assert first["state"] == again["state"] == "succeeded"
    written = first["rows_written"]  # the demo CRM's malformed records are refused each time
    assert written + first["rows_failed"] == ORGANIZATIONS and first["rows_skipped"] == 0
    assert (again["rows_written"], again["rows_skipped"]) == (0, written)
    assert again["rows_failed"] == first["rows_failed"]
    with connect.connect(db_url) as conn:
        rows = conn.execute("SELECT count(*) AS n FROM crm_organizations").fetchone()
    assert rows is not None and rows["n"] == written
    # record by record, the re-run would take a transaction id per record (its savepoint's
    # insert); a window at a time it takes a few per page (claims, checkpoints, the barrier)
    assert after - before < ORGANIZATIONS / 4, after - before
