"""A source whose pagination loops (the demo CRM's ``paging_loop`` mode): a cursor listing that
hands back the cursor it was given, an offset listing that answers its first page at every
offset. The loop guard fails the run with a message naming the kind and the token, and the
run ends: it never walks the same page for ever."""

from __future__ import annotations

import re
from typing import Any

import democrm_styles
import pytest
from migration import credential, engine_worker, request, start_run, wait_finished
from tests.democrm.server_fixture import DemoCRM

DATASET = {"organizations": 600, "people": 0, "deals": 0, "malformed_rate": 0}

pytestmark = pytest.mark.timeout(240)  # wait_finished gives up after 120 s: a loop never ends


def _run(db_url: str, style: str, loop: str) -> tuple[dict[str, Any], str]:
    """A run of the organizations (pages of 100) paged in ``style`` against a demo CRM whose
    pagination loops as ``loop`` says; its final state, and the cursor the server names
    after its first page (read through its own API)."""
    with DemoCRM.start(seed=33, paging_loop=loop, **DATASET) as crm, credential(crm.api_key):
        with crm.client() as http:
            first = http.get("/v1/organizations", params={"paging": "cursor", "limit": 100})
        with engine_worker(db_url):
            run = request(crm.url, kinds=["organizations"], page_size=100,
                          provider_definition=democrm_styles.definition(style))  # fmt: skip
            final = wait_finished(db_url, start_run(db_url, run))
    return final, first.json()["pagination"]["next_cursor"]


def test_a_cursor_the_source_repeats_fails_the_run_naming_the_kind_and_the_token(
    db_url: str,
) -> None:
    final, cursor = _run(db_url, "cursor", "token")
    assert final["state"] == "failed"
    assert f'organizations: the source gave the token "{cursor}" again' in final["error"]
    assert "its pagination loops" in final["error"]


def test_an_offset_the_source_ignores_fails_the_run_naming_the_kind_and_the_token(
    db_url: str,
) -> None:
    final, _ = _run(db_url, "offset", "page")
    assert final["state"] == "failed"
    named = re.search(
        r"organizations: the page at token (\d+) repeats the page before it", final["error"]
    )
    assert named, final["error"]
    offset = int(named[1])  # which stripe meets the loop first depends on the workers' timing
    assert offset > 0 and offset % 100 == 0  # an offset past the first page, in pages of 100
