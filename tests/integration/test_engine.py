"""The migration engine end to end: real PostgreSQL, the demo CRM over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from migration import (
    check_against_truth,
    credential,
    engine_worker,
    request,
    start_run,
    wait_finished,
)
from tests.democrm.server_fixture import DemoCRM

SMALL: dict[str, Any] = {
    "organizations": 1200,
    "people": 600,
    "deals": 45,
    "messages_per_deal": 3,
    "malformed_rate": 0.03,
}


def test_a_run_writes_every_source_row_once(db_url: str) -> None:
    with DemoCRM.start(seed=3, **SMALL) as crm, credential(crm.api_key), engine_worker(db_url):
        run_id = start_run(db_url, request(crm.url, page_size=200))
        final = wait_finished(db_url, run_id)
        truth = crm.truth()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth)
    malformed = sum(
        len(truth[k]["malformed"]) for k in ("organizations", "people", "deals", "messages")
    )
    assert final["rows_failed"] == malformed
    assert final["tasks_done"] == final["tasks_total"]


@pytest.mark.parametrize("rows", [0, 1, 499, 500, 501, 2000])
def test_stripes_cover_a_collection_with_no_gap_and_no_overlap(db_url: str, rows: int) -> None:
    with (
        DemoCRM.start(seed=5, organizations=rows, people=0, deals=0, malformed_rate=0) as crm,
        credential(crm.api_key),
        engine_worker(db_url),
    ):
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"]))
        final = wait_finished(db_url, run_id)
        truth = crm.truth()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("organizations",))


def test_the_contract_reports_a_finished_run_as_a_status(db_url: str) -> None:
    from ferryman_worker import contract
    from ferryman_worker.db import connect

    with (
        DemoCRM.start(seed=4, organizations=300, people=0, deals=0, malformed_rate=0.02) as crm,
        credential(crm.api_key),
        engine_worker(db_url),
    ):
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"], page_size=100))
        wait_finished(db_url, run_id)
        malformed = len(crm.truth()["organizations"]["malformed"])
    with connect.connect(db_url) as conn:
        (run,) = contract.progress(conn, "run-1")
    status = run.status()
    assert status.state is contract.RunState.SUCCEEDED
    assert status.rows_written == 300 - malformed and status.rows_failed == malformed
    assert status.tasks_summary == f"{run.tasks_done}/{run.tasks_total}"
    assert status.finished_at is not None and status.phase is None
