"""The migration engine end to end: real PostgreSQL, the demo CRM over real HTTP."""

from __future__ import annotations

import logging
from typing import Any

import democrm_styles
import pytest
from migration import (
    check_against_truth,
    credential,
    engine_worker,
    request,
    start_run,
    state,
    wait_finished,
)
from net import wait_for
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker.db import connect
from ferryman_worker.engine import runs, tree

SMALL: dict[str, Any] = {
    "organizations": 1200,
    "people": 600,
    "deals": 45,
    "messages_per_deal": 3,
    "malformed_rate": 0.03,
}


@pytest.mark.parametrize("style", democrm_styles.STYLES)
def test_a_run_writes_every_source_row_once(db_url: str, style: str) -> None:
    """In every pagination style: every well-formed row once, every malformed one a row
    error."""
    definition = democrm_styles.definition(style)
    with DemoCRM.start(seed=3, **SMALL) as crm, credential(crm.api_key), engine_worker(db_url):
        run_id = start_run(db_url, request(crm.url, page_size=200, provider_definition=definition))
        final = wait_finished(db_url, run_id)
        truth = crm.truth()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth)
    malformed = sum(
        len(truth[k]["malformed"]) for k in ("organizations", "people", "deals", "messages")
    )
    assert final["rows_failed"] == malformed
    assert final["tasks_done"] == final["tasks_total"]


DESTINATION = {
    "organizations": "SELECT o.source_id, o.name, o.domain, o.created_at FROM crm_organizations o"
    " WHERE o.workspace = %(ws)s",
    "people": "SELECT p.source_id, o.source_id AS organization, p.name, p.email, p.phone"
    " FROM crm_people p LEFT JOIN crm_organizations o ON o.id = p.organization_id"
    " WHERE p.workspace = %(ws)s",
    "deals": "SELECT d.source_id, o.source_id AS organization, d.title, d.value, d.currency,"
    " d.stage, d.status FROM crm_deals d LEFT JOIN crm_organizations o"
    " ON o.id = d.organization_id WHERE d.workspace = %(ws)s",
    "deal people": "SELECT d.source_id AS deal, p.source_id AS person FROM crm_deal_people dp"
    " JOIN crm_deals d ON d.id = dp.deal_id JOIN crm_people p ON p.id = dp.person_id"
    " WHERE d.workspace = %(ws)s",
    "messages": "SELECT m.source_id, d.source_id AS deal, m.subject, m.sender, m.sent_at, m.body"
    " FROM crm_messages m LEFT JOIN crm_deals d ON d.id = m.deal_id WHERE m.workspace = %(ws)s",
    "ledger": "SELECT kind, source_id, source_version FROM ferryman_ledger"
    " WHERE workspace = %(ws)s",
    "row errors": "SELECT e.kind, e.source_id, e.reason FROM ferryman_row_errors e"
    " JOIN ferryman_runs r ON r.id = e.run_id WHERE r.workspace = %(ws)s",
}
"""A workspace's destination with row ids read as source ids, so that two workspaces compare."""


def _destination(db_url: str, workspace: str) -> dict[str, list[tuple[Any, ...]]]:
    with connect.connect(db_url) as conn:
        return {
            part: sorted(
                tuple(row.values())
                for row in conn.execute(query, {"ws": workspace})  # type: ignore[arg-type]
            )
            for part, query in DESTINATION.items()
        }


def test_the_python_demo_crm_provider_writes_exactly_what_the_declarative_one_does(
    db_url: str,
) -> None:
    """`democrm` (the YAML file) and `democrm_python` (the same in code, the example of a
    provider in Python), each in its own workspace, on the same demo CRM: the same rows, foreign
    keys, deal participants, message bodies (the tree walk's fetch threads), ledger versions and
    row errors."""
    with DemoCRM.start(seed=3, **SMALL) as crm, credential(crm.api_key), engine_worker(db_url):
        for provider in ("democrm", "democrm_python"):
            req = request(crm.url, name=provider, workspace=provider, provider=provider)
            final = wait_finished(db_url, start_run(db_url, req))
            assert final["state"] == "succeeded", (provider, final["error"])
        truth = crm.truth()
    check_against_truth(db_url, truth, workspace="democrm_python")
    declarative, python = _destination(db_url, "democrm"), _destination(db_url, "democrm_python")
    assert all(python.values())  # nothing compared empty
    assert python == declarative


@pytest.mark.parametrize("style", democrm_styles.STYLES)
def test_records_deleted_after_their_listing_are_not_written(
    db_url: str, caplog: pytest.LogCaptureFixture, style: str
) -> None:
    """A message whose body is gone is a row error; a deal whose messages are gone has none;
    in every pagination style."""
    caplog.set_level(logging.INFO, "ferryman.engine")
    definition = democrm_styles.definition(style)
    sizes = {"organizations": 20, "people": 20, "deals": 40}
    with (
        DemoCRM.start(seed=4, malformed_rate=0.3, gone_deal_rate=0.25, **sizes) as crm,
        credential(crm.api_key),
        engine_worker(db_url),
    ):
        run_id = start_run(db_url, request(crm.url, provider_definition=definition))
        final = wait_finished(db_url, run_id)
        truth = crm.truth()
    assert final["state"] == "succeeded", final["error"]
    assert truth["deals"]["gone"] and truth["messages"]["count"] > 0
    check_against_truth(db_url, truth)  # gone deals written, none of their messages
    gone = {i for i, why in truth["messages"]["malformed"].items() if why == "gone:body"}
    with connect.connect(db_url) as conn:
        recorded = conn.execute(
            "SELECT source_id FROM ferryman_row_errors WHERE kind = 'messages'"
            " AND reason LIKE 'gone from the source before its body was fetched: %%HTTP 404%%'"
        ).fetchall()
    assert gone and {r["source_id"] for r in recorded} == gone
    said = {r.getMessage() for r in caplog.records if r.name == "ferryman.engine"}
    for deal in truth["deals"]["gone"]:
        assert any(f"deals {deal} is gone from the source: no messages" in m for m in said), deal


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


def test_pages_are_at_most_the_largest_the_provider_serves(db_url: str) -> None:
    """The demo CRM refuses a limit over 500 (HTTP 400, which fails a run): a run asking for
    pages of 2,000 gets pages of 500, the provider's largest."""
    with (
        DemoCRM.start(seed=6, organizations=1100, people=0, deals=0, malformed_rate=0) as crm,
        credential(crm.api_key),
        engine_worker(db_url),
    ):
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"], page_size=2000))
        final = wait_finished(db_url, run_id)
        truth = crm.truth()
        with connect.connect(db_url) as conn:
            keys = [
                row["cursor_key"]
                for row in conn.execute("SELECT cursor_key FROM ferryman_tasks ORDER BY id")
            ]
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("organizations",))
    # pages of 500: 0-2 hold the 1,100 rows; the 4 stripes' first pages are 0-3, the two full
    # ones lead to pages 4 and 5 (empty)
    assert sorted(keys) == [f"organizations:{page}" for page in range(6)]


def test_the_contract_reports_a_finished_run_as_a_status(db_url: str) -> None:
    from ferryman_worker import contract

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


def test_the_email_walk_fetches_each_body_once_and_resumes_where_it_stopped(
    db_url: str,
) -> None:
    """Listings side by side and paged, rounds that span deals (fetch_threads 3 x 8 bodies over
    deals of up to 10 messages); a suspended walk resumes at its deal: a stopped task fetches
    again at most what it held, its last round plus the deal the round before left half-fetched."""
    dataset = {"organizations": 1, "people": 1, "deals": 40, "messages_per_deal": 5}
    with (
        DemoCRM.start(seed=8, body_latency_ms=5, malformed_rate=0, **dataset) as crm,
        credential(crm.api_key),
        engine_worker(db_url, lanes="migrations:2"),
    ):
        req = request(  # pages of 4: a deal's messages take up to 3 listing calls
            crm.url, kinds=["deals", "messages"], fetch_threads=3, parents_per_task=7, page_size=4
        )
        run_id = start_run(db_url, req)
        wait_for(lambda: _messages_written(db_url, run_id) > 40, 60, "some messages")
        with connect.connect(db_url) as conn:
            assert runs.suspend(conn, run_id)
        wait_for(lambda: state(db_url, run_id)["tasks_running"] == 0, 20, "tasks to stop")
        with connect.connect(db_url) as conn:
            runs.resume(conn, run_id)
        final = wait_finished(db_url, run_id)
        truth, stats = crm.truth(), crm.stats()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("deals", "messages"))
    bodies = stats["requests"]["GET /v1/messages/{id}"]["200"]
    messages = truth["messages"]["count"]
    cut_off = 2 * (3 * tree.ROUND_PER_THREAD + 2 * 5)  # lane width x what one task holds
    assert messages <= bodies <= messages + cut_off


def _messages_written(db_url: str, run_id: int) -> int:
    with connect.connect(db_url) as conn:
        kinds = {row["kind"]: row for row in runs.kind_progress(conn, run_id)}
    return int(kinds["messages"]["written"] or 0) if "messages" in kinds else 0
