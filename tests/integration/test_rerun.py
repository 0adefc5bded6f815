"""A run of a workspace whose records the ledger already holds (a re-run, a retried task, a run
resumed after a crash) skips them a window at a time: each window stays one statement, never one
savepoint per record, and every record is counted as skipped, none written twice."""

from __future__ import annotations

from typing import Any

from migration import credential, engine_worker, request, start_run, wait_finished
from tests.democrm.server_fixture import DEFAULT_API_KEY, DemoCRM
from workers import scalar

from ferryman_worker import metrics
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


def windows_committed(kind: str) -> float:
    sample = metrics.REGISTRY.get_sample_value(
        "ferryman_window_commit_seconds_count", {"kind": kind}
    )
    return sample or 0.0


def test_a_rerun_of_a_grown_source_writes_only_its_new_records_and_no_window_for_known_ones(
    db_url: str,
) -> None:
    grown = ORGANIZATIONS + 300  # the same seed lists the same first records, then more
    clean: dict[str, Any] = {"people": 0, "deals": 0, "malformed_rate": 0}
    metrics.enable()
    try:
        with credential(DEFAULT_API_KEY), engine_worker(db_url):
            with DemoCRM.start(seed=5, organizations=ORGANIZATIONS, **clean) as crm:
                first = wait_finished(db_url, start_run(db_url, request(crm.url, "first")))
            with DemoCRM.start(seed=5, organizations=grown, **clean) as crm:
                before = windows_committed("organizations")
                again = wait_finished(db_url, start_run(db_url, request(crm.url, "again")))
                windows = windows_committed("organizations") - before
    finally:
        metrics.disable()
    assert first["state"] == again["state"] == "succeeded"
    assert again["rows_skipped"] == first["rows_written"]
    assert (first["rows_written"], again["rows_written"]) == (ORGANIZATIONS, grown - ORGANIZATIONS)
    with connect.connect(db_url) as conn:
        rows = conn.execute("SELECT count(*) AS n FROM crm_organizations").fetchone()
        tasks = scalar(
            db_url,
            f"SELECT count(*) FROM ferryman_tasks WHERE run_id = {again['id']}"
            " AND kind = 'organizations'",
        )
    assert rows is not None and rows["n"] == first["rows_written"] + again["rows_written"]
    # each page's known records were looked up at once: a window of them alone is no statement
    # of its own; what is left is each task's last window and the windows of the new records
    window_size = int(request("").options["window_size"])
    assert windows == int(tasks) - 1 + (grown - ORGANIZATIONS) // window_size, (windows, tasks)
