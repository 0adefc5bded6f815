"""Quota another integration spends on the same account: the demo CRM reports what is left in
its rate-limit headers, and the run's shared budget follows it instead of meeting 429s."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

import pytest
from tests.democrm.conftest import SMALL
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker.db import connect
from ferryman_worker.engine.credentials import Credential, url_host
from ferryman_worker.engine.ratelimit import Budget, Quota
from ferryman_worker.engine.runtime import EngineRuntime
from ferryman_worker.engine.source import RateLimited
from ferryman_worker.providers import Request

RATE = 40.0
"""Tokens per second of the account, declared by the run as its own."""
OUTSIDE = 20.0
BURST = 20.0
"""Tokens per second another integration spends on the same account meanwhile."""


class Outside:
    """Another integration on the same API key: a listing (1 token, as each of our calls)
    OUTSIDE times a second, on its own schedule whatever the source answers."""

    def __init__(self, crm: DemoCRM) -> None:
        self.crm, self.stop = crm, threading.Event()

    def run(self) -> None:
        with self.crm.client() as http:
            while not self.stop.wait(1 / OUTSIDE):
                http.get("/v1/deals", params={"limit": 1})  # refused or not


@contextlib.contextmanager
def outside_consumer(crm: DemoCRM) -> Iterator[Outside]:
    outside = Outside(crm)
    thread = threading.Thread(target=outside.run, name="outside-consumer")
    thread.start()
    try:
        yield outside
    finally:
        outside.stop.set()
        thread.join()


def _calls_refused(crm: DemoCRM, db_url: str, calls: int) -> int:
    """``calls`` message bodies through a worker's client and budget, as a task makes them:
    how many the source refused."""
    runtime = EngineRuntime()
    credential = Credential({"token": crm.api_key}, (url_host(crm.url),))
    client = runtime.client(crm.url, credential)
    budget = runtime.budget(crm.url, credential, {"tokens_per_second": RATE, "burst": BURST})
    body = Request(f"/v1/messages/{crm.truth()['messages']['ids'][0]}", {}, 1)
    refused = 0
    with connect.connect(db_url) as conn:
        for _ in range(calls):
            budget.reserve(conn, 1)
            try:
                client.get(body)
            except RateLimited as error:
                refused += 1
                budget.pause(conn, error.pause(1))
    runtime.close()
    return refused


def test_quota_spent_by_another_integration_slows_a_worker_without_a_429_storm(
    db_url: str,
) -> None:
    options = {"budget_capacity": BURST, "budget_refill_per_s": RATE, "listing_cost": 1}
    with DemoCRM.start(body_cost=1, **SMALL, **options) as crm, outside_consumer(crm):
        refused = _calls_refused(crm, db_url, 150)
        spent = crm.stats()["requests"]["GET /v1/deals"].get("200", 0)
    assert spent >= 20  # the other integration did spend the account's quota meanwhile
    assert refused <= 2


def test_a_round_dearer_than_the_quota_waits_for_a_calls_worth_not_for_the_whole_reset(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A tree task lists its parents in rounds (four listings of 20 tokens: 80, the source's
    whole quota here). With 10 left, the pause lasts until half the quota is back, as for one
    call, not until the bucket is full again (which a round of 80 would need)."""
    budget = Budget("round-of-four", capacity=80, refill_per_s=60)
    reported = {"x-ratelimit-limit": "80", "x-ratelimit-remaining": "10", "x-ratelimit-reset": "2"}
    budget.observe(reported)
    with connect.connect(db_url) as conn, caplog.at_level(logging.INFO, "ferryman.engine"):
        budget.reserve(conn, 80, largest_call=20)
    pauses = [r.getMessage() for r in caplog.records if " paused for " in r.getMessage()]
    wait = Quota(10, 2, 80).wait_for(20)
    assert wait is not None and wait < 2
    assert pauses == [
        f"source credential round-of-four paused for {wait:g}s: the source reported its quota spent"
    ]
