"""A source whose records are deleted or created while a run walks it (the demo CRM's
``/_drift``, applied after a given page). Pages by position (offset, page number, Link header)
drift: a record deleted behind the walk makes the next page skip a live record; a record created
behind it makes the next page list records already written, which the ledger writes once. Pages
after an id (next URL, cursor, keyset) neither skip nor repeat. A record created behind the walk
is missed by every style: the next run picks it up."""

from __future__ import annotations

from typing import Any

import democrm_styles
import pytest
from migration import credential, engine_worker, request, start_run, wait_finished
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker.db import connect

BY_POSITION = ("offset", "page_number", "link_header")
AFTER_AN_ID = ("next_url", "cursor", "keyset")
ORGANIZATIONS = 600
PAGE = 100
"""One chain (``stripes: 1``) of pages of 100: a change after two pages lands at offset 200."""


def _run(
    db_url: str, style: str, *changes: dict[str, Any]
) -> tuple[dict[str, Any], list[int], dict[str, Any]]:
    """A run of the organizations in ``style`` while ``changes`` are posted; its final state,
    the source ids written and the kind's verdict: reconciled with the total the demo CRM
    states (unverified for offsets, where it states none), the drift explained, never short."""
    definition = democrm_styles.definition(style)
    dataset = {"organizations": ORGANIZATIONS, "people": 0, "deals": 0, "malformed_rate": 0}
    with DemoCRM.start(seed=31, **dataset) as crm, credential(crm.api_key), engine_worker(db_url):
        for change in changes:
            crm.drift(kind="organizations", **change)
        run = request(crm.url, kinds=["organizations"], provider_definition=definition,
                      stripes=1, page_size=PAGE)  # fmt: skip
        final = wait_finished(db_url, start_run(db_url, run))
        assert crm.drifted()["waiting"] == 0, "a change was never applied"
    with connect.connect(db_url) as conn:
        rows = conn.execute("SELECT source_id FROM crm_organizations").fetchall()
        ledger = conn.execute("SELECT count(*) AS n FROM ferryman_ledger").fetchone()
        verdict = conn.execute("SELECT * FROM ferryman_run_kinds").fetchone()
    written = sorted(int(row["source_id"]) for row in rows)
    assert final["state"] == "succeeded", final["error"]
    assert ledger is not None and ledger["n"] == len(written) == len(set(written))  # once each
    assert verdict is not None
    assert verdict["verdict"] == ("unverified" if style == "offset" else "reconciled")
    return final, written, verdict


@pytest.mark.parametrize("style", BY_POSITION + AFTER_AN_ID)
def test_records_deleted_behind_the_walk_make_pages_by_position_miss_live_ones(
    db_url: str, style: str
) -> None:
    _, written, verdict = _run(db_url, style, {"delete": [1, 2, 3, 4, 5], "after_pages": 2})
    missed = {201, 202, 203, 204, 205} if style in BY_POSITION else set()
    assert written == [i for i in range(1, ORGANIZATIONS + 1) if i not in missed]
    # by position the walk lists as many as the total says (the five it missed are live ones
    # only a verification against the source's ids can name); after an id it lists the five
    # deleted behind it too
    assert verdict["listed"] == (595 if style in BY_POSITION else 600)
    if style != "offset":
        assert verdict["total"] == 595
        assert "the total moved between 595 and 600 during the walk" in verdict["note"]


@pytest.mark.parametrize("style", BY_POSITION + AFTER_AN_ID)
def test_records_created_behind_the_walk_are_listed_twice_by_position_and_written_once(
    db_url: str, style: str
) -> None:
    final, written, verdict = _run(
        db_url, style, {"delete": [1, 2, 3, 4, 5]}, {"create": [1, 2, 3, 4, 5], "after_pages": 2}
    )
    assert written == list(range(6, ORGANIZATIONS + 1))  # 1..5: created behind every walk
    assert final["rows_skipped"] == (5 if style in BY_POSITION else 0)  # listed twice
    # by position five are listed twice, so the walk lists as many as the grown total; after
    # an id it lists what the total was when it began: the five created behind it are the
    # next run's
    assert verdict["listed"] == (600 if style in BY_POSITION else 595)
    if style != "offset":
        assert verdict["total"] == 595
        assert "the total moved between 595 and 600 during the walk" in verdict["note"]
