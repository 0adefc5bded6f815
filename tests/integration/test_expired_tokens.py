"""A page token the source expires mid-walk (the demo CRM's cursors, expired at a chosen page
with ``/_drift``): the chain begins again at its first page, the ledger writes once what it
lists again, and a source that keeps expiring them fails the run with its answer."""

from __future__ import annotations

from typing import Any

import democrm_styles
from migration import credential, engine_worker, request, start_run, wait_finished
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker.db import connect

ORGANIZATIONS = 600
DATASET = {"organizations": ORGANIZATIONS, "people": 0, "deals": 0, "malformed_rate": 0}


def _run(db_url: str, *pages: int) -> tuple[dict[str, Any], list[int], dict[str, int]]:
    """A cursor-paged run of the organizations (pages of 100) whose cursors expire after each
    of ``pages`` (counted from the start); its final state, the ids written, and what the
    server answered to the listing."""
    definition = democrm_styles.definition("cursor")
    with DemoCRM.start(seed=32, **DATASET) as crm, credential(crm.api_key), engine_worker(db_url):
        for after in pages:
            crm.drift(kind="organizations", expire_cursors=True, after_pages=after)
        run = request(crm.url, kinds=["organizations"], provider_definition=definition,
                      page_size=100)  # fmt: skip
        final = wait_finished(db_url, start_run(db_url, run))
        answered = crm.stats()["requests"]["GET /v1/organizations"]
    with connect.connect(db_url) as conn:
        rows = conn.execute("SELECT source_id FROM crm_organizations").fetchall()
    return final, sorted(int(row["source_id"]) for row in rows), answered


def test_an_expired_cursor_restarts_the_chain_and_the_ledger_writes_once(db_url: str) -> None:
    final, written, answered = _run(db_url, 3)
    assert final["state"] == "succeeded", final["error"]
    assert written == list(range(1, ORGANIZATIONS + 1))
    assert answered == {"200": 3 + 6, "410": 1}  # three pages, the expired one, all six again
    assert final["rows_skipped"] == 300  # the first three pages, listed twice


def test_a_source_that_keeps_expiring_cursors_fails_the_run_naming_it(db_url: str) -> None:
    final, _, answered = _run(db_url, 1, 2, 3, 4)
    assert final["state"] == "failed"
    assert "organizations: the source expired the chain's page token 4 times" in final["error"]
    assert "HTTP 410" in final["error"]
    assert answered["410"] == 4
