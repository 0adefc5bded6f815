"""`ferryman verify` on a finished run of the demo CRM, against a real PostgreSQL: the source's
ids listed again (through the run's provider, credential and rate budget) and compared with the
workspace's ledger, per kind; a tree kind (messages) per parent the verification listed."""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterator
from typing import Any

import pytest
from migration import credential, engine_worker, request, start_run, wait_finished
from net import wait_for
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker import cli, contract, metrics, report
from ferryman_worker.db import connect
from ferryman_worker.engine import verification, verify
from ferryman_worker.engine.credentials import Credential, url_host
from ferryman_worker.engine.ratelimit import credential_key
from ferryman_worker.engine.runtime import EngineRuntime
from ferryman_worker.providers.democrm import BODY_COST, LISTING_COST

DATASET = {"organizations": 120, "people": 40, "deals": 12, "messages_per_deal": 2}
KINDS = ("organizations", "people", "deals", "messages")


@contextlib.contextmanager
def imported(db_url: str, **options: Any) -> Iterator[tuple[DemoCRM, int]]:
    """The demo CRM, and a run that imported it all and succeeded."""
    with DemoCRM.start(seed=11, **DATASET) as crm, credential(crm.api_key):
        with engine_worker(db_url):
            final = wait_finished(db_url, start_run(db_url, request(crm.url, **options)))
        assert final["state"] == "succeeded", final["error"]
        yield crm, int(final["id"])


def checks(db_url: str, run_id: int) -> dict[str, verification.KindCheck]:
    with connect.connect(db_url) as conn:
        found = verification.read(conn, run_id)
    assert found is not None
    return {kind.kind: kind for kind in found.kinds}


def test_a_clean_run_verifies_with_nothing_missing_and_nothing_gone(db_url: str) -> None:
    with imported(db_url) as (crm, run_id):
        truth = crm.truth()
        # the workers' verification job does it
        with engine_worker(db_url), connect.connect(db_url) as conn:
            verification.request(conn, run_id, "test")
            wait_for(lambda: _state(conn, run_id) == "done", 120, "the verification")
            found = verification.read(conn, run_id)
    assert found is not None and found.verdict == "verified", found
    kinds = {kind.kind: kind for kind in found.kinds}
    assert list(kinds) == list(KINDS)
    for name in ("organizations", "people", "deals"):
        # every record the source lists, the malformed (the run's row errors) among them
        assert kinds[name].listed == truth[name]["count"], name
    assert kinds["messages"].listed == truth["messages"]["count"]
    assert all((k.missing, k.gone) == (0, 0) for k in found.kinds), found
    assert "the children of 12 deals listed" in kinds["messages"].note
    with connect.connect(db_url) as conn:  # what it listed is not kept
        assert conn.execute("SELECT count(*) AS n FROM ferryman_verify_listed").fetchone() == {
            "n": 0
        }
        # the demo CRM states no totals: unverified at the barrier, proven by the verification
        [progress] = contract.progress(conn, "run-1")
        said = report.build(conn, "run-1", datetime.datetime.now(datetime.UTC))
    assert [(v.kind, v.verdict) for v in progress.verdicts] == [(k, "verified") for k in KINDS]
    assert "each in the ledger" in progress.verdicts[0].note
    assert said.complete and [k.verdict for k in said.kinds] == ["verified"] * len(KINDS)
    assert all(k.verification is not None and k.verification.verified for k in said.kinds)
    assert "a verification found every id the source lists" in report.render(said, "text")


def test_verify_finds_a_lost_write_and_a_record_added_or_deleted_after_the_run(
    db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with imported(db_url) as (crm, run_id):
        with connect.connect(db_url) as conn:
            # A write the ledger lost: no real event drops one ledger row of a committed window
            # (the row and its ledger slot commit together), so only SQL can stand for it: a
            # restore from an older backup, a hand-edited table.
            conn.execute(
                "DELETE FROM ferryman_ledger WHERE (kind, source_id)"
                " IN (('organizations', '7'), ('messages', '3'))"
            )
            deal = conn.execute(  # the deal with the most messages (none of them message 3)
                "SELECT d.source_id AS id, count(*) AS n FROM ferryman_ledger l"
                " JOIN crm_messages m ON m.id = l.row_id"
                " JOIN ferryman_ledger d ON d.kind = 'deals' AND d.row_id = m.deal_id"
                " WHERE l.kind = 'messages' AND l.source_id <> '3'"
                " GROUP BY d.source_id ORDER BY count(*) DESC, d.source_id LIMIT 1"
            ).fetchone()
            assert deal is not None and deal["n"] > 0
        # the source moved on after the run: two organizations added, a deal deleted
        crm.change(add={"organizations": 2}, delete={"deals": [int(deal["id"])]})
        monkeypatch.setenv("FERRYMAN_DATABASE_URL", db_url)
        status = cli.main(["verify", "run-1"])
        printed = capsys.readouterr().out
        kinds = checks(db_url, run_id)
    assert status == 1
    organizations = kinds["organizations"]
    assert (organizations.missing, organizations.gone) == (3, 0)
    assert organizations.missing_ids == ("7", "121", "122")
    deals = kinds["deals"]
    assert (deals.missing, deals.gone, deals.gone_ids) == (0, 1, (deal["id"],))
    messages = kinds["messages"]  # the deleted deal's are gone with it: it lists no children
    assert (messages.missing, messages.gone) == (1, deal["n"]), messages
    assert messages.missing_ids == ("3",)
    assert (kinds["people"].missing, kinds["people"].gone) == (0, 0)
    assert "verification: differs: 4 kind(s), 4 missing" in printed
    assert "organizations: differs: 122 listed, 3 missing, 0 gone; missing 7, 121, 122" in printed
    with connect.connect(db_url) as conn:
        [progress] = contract.progress(conn, "run-1")
        said = report.build(conn, "run-1", datetime.datetime.now(datetime.UTC))
    verdicts = {v.kind: (v.verdict, v.shortfall) for v in progress.verdicts}
    # missing ids make a kind short by their count; ids gone from the source since do not
    assert verdicts == {
        "organizations": ("short", 3),
        "people": ("verified", None),
        "deals": ("verified", None),
        "messages": ("short", 1),
    }
    assert "id(s) of the ledger are gone from the source since" in progress.verdicts[2].note
    assert not said.complete
    assert [(k.kind, k.short_by) for k in said.kinds if k.verdict == "short"] == [
        ("organizations", 3),
        ("messages", 1),
    ]
    assert "NOT complete: Succeeded; see organizations, messages" in report.render(said, "text")


def test_verification_spends_the_credentials_rate_budget_listings_only(db_url: str) -> None:
    rate = {"burst": 1_000_000, "tokens_per_second": 0.001}  # no refill to speak of
    with imported(db_url, rate_limit=rate) as (crm, run_id):
        key = credential_key(crm.url, Credential({"token": crm.api_key}, (url_host(crm.url),)).id)
        runtime = EngineRuntime(database_url=db_url)
        metrics.enable()
        try:
            with connect.connect(db_url) as conn:
                before = _tokens(conn, key)
                crm.reset_stats()
                verification.request(conn, run_id, "test", queue=False)
                verify.run(conn, run_id, runtime)
                after = _tokens(conn, key)
            spent = metrics.TOKENS_SPENT.labels(key)._value.get()
        finally:
            metrics.disable()
            runtime.close()
        calls = crm.stats()["requests"]
    listings = sum(sum(counts.values()) for path, counts in calls.items() if "/messages" in path
                   or path.split("?")[0] in {f"GET /v1/{k}" for k in KINDS[:3]})  # fmt: skip
    assert "GET /v1/messages/{id}" not in calls  # no body is fetched: ids only
    assert listings > 0 and spent == LISTING_COST * listings != 0
    assert before - after >= spent  # leased from the credential's shared budget
    assert BODY_COST  # (the run itself fetched bodies at their own cost)


def _state(conn: connect.Connection, run_id: int) -> str | None:
    found = verification.read(conn, run_id)
    return None if found is None else found.state


def _tokens(conn: connect.Connection, credential: str) -> float:
    row = conn.execute(
        "SELECT tokens FROM ferryman_rate_budgets WHERE credential = %s", (credential,)
    ).fetchone()
    assert row is not None
    return float(row["tokens"])


@pytest.fixture(autouse=True)
def _no_database_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERRYMAN_DATABASE_URL", raising=False)
    assert "FERRYMAN_DATABASE_URL" not in os.environ
