"""The rate-limit budget: leased in chunks from one row shared by every worker of a credential;
a 429 pauses them all."""

from __future__ import annotations

import time

import httpx
import pytest

from ferryman_worker.db import connect
from ferryman_worker.engine.ratelimit import Budget, credential_key


def _budget(sleeps: list[float], **kwargs: float) -> Budget:
    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        time.sleep(seconds)

    return Budget(credential_key("http://crm", "token"), sleep=sleep, **kwargs)


def _row(conn: connect.Connection) -> dict[str, object]:
    row = conn.execute("SELECT * FROM ferryman_rate_budgets").fetchone()
    assert row is not None
    return row


def test_tokens_are_leased_in_chunks_not_per_call(conn: connect.Connection) -> None:
    sleeps: list[float] = []
    budget = _budget(sleeps, capacity=1000, refill_per_s=0.001, chunk=100)
    for _ in range(5):
        budget.reserve(conn, 20)  # five listings: one lease of 100 tokens
    assert sleeps == []
    assert round(float(_row(conn)["tokens"])) == 900


def test_two_workers_share_one_budget_and_wait_for_the_refill(db_url: str) -> None:
    sleeps: list[float] = []
    with connect.connect(db_url) as one, connect.connect(db_url) as two:
        first = _budget(sleeps, capacity=100, refill_per_s=50, chunk=100)
        second = _budget(sleeps, capacity=100, refill_per_s=50, chunk=100)
        first.reserve(one, 100)  # takes the whole budget
        second.reserve(two, 20)  # must wait for 20 tokens to refill at 50/s
    assert sleeps and 0.1 < sleeps[0] <= 0.45


def test_a_429_pauses_every_worker_of_the_credential(db_url: str) -> None:
    sleeps: list[float] = []
    with connect.connect(db_url) as one, connect.connect(db_url) as two:
        first = _budget(sleeps)
        second = _budget(sleeps)
        first.reserve(one, 1)
        first.pause(one, 2)  # the source said Retry-After: 2
        began = time.monotonic()
        second.reserve(two, 1)  # another process: it waits out the pause first
    assert sleeps and 1.5 < sleeps[0] <= 2.0
    assert 1.5 < time.monotonic() - began < 3.0


def test_the_quota_the_source_reports_caps_the_budget_of_every_worker(db_url: str) -> None:
    sleeps: list[float] = []
    with connect.connect(db_url) as one, connect.connect(db_url) as two:
        first = _budget(sleeps, capacity=1000, refill_per_s=50, chunk=100)
        second = _budget(sleeps, capacity=1000, refill_per_s=50, chunk=100)
        first.observe(httpx.Headers({"X-RateLimit-Remaining": "30", "X-RateLimit-Reset": "60"}))
        first.reserve(one, 1)  # tells the shared budget: 30 left, not 1000
        assert sleeps == []
        second.reserve(two, 20)  # another process: the 29 left went to the first; it waits
    assert sleeps and 0.1 < sleeps[0] <= 0.45


class _Waits(Exception):
    """Raised by a sleep that only records how long it was asked to wait."""


def _record(seconds: float) -> None:
    raise _Waits(seconds)


def test_a_spent_quota_pauses_every_worker_until_the_source_s_reset(
    db_url: str,
) -> None:
    sleeps: list[float] = []
    with connect.connect(db_url) as one, connect.connect(db_url) as two:
        first = Budget(credential_key("http://crm", "token"), sleep=_record)
        first.reserve(one, 1)
        first.observe(httpx.Headers({"RateLimit": '"default";r=0;t=2'}))
        with pytest.raises(_Waits) as told:
            first.reserve(one, 1)  # tells the shared budget, and would wait out the reset
        _budget(sleeps).reserve(two, 1)  # another process: waits too
    assert 1.5 < told.value.args[0] <= 2.0
    assert sleeps and 1.5 < sleeps[0] <= 2.0
