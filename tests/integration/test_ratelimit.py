"""The rate-limit budget: leased in chunks from one row shared by every worker of a credential;
a 429 pauses them all."""

from __future__ import annotations

import time

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
