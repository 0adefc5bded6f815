"""The ETA: the open phase's remaining time from the pace so far or, when the run declares the
source's rate limit and it binds, from the tokens the remaining calls need at its rate."""

from __future__ import annotations

import time

import pytest
from migration import credential, engine_worker, request, start_run, state
from tests.democrm.server_fixture import DemoCRM
from workers import wait_for

from ferryman_worker import console, eta
from ferryman_worker.db import connect
from ferryman_worker.engine import runs

RATE = 150.0  # tokens/s the run declares; the demo CRM's own budget is a little larger


def _estimate(db_url: str, run_id: int) -> tuple[eta.Estimate | None, float]:
    with connect.connect(db_url) as conn:
        progress = runs.kind_progress(conn, run_id)
        done = conn.execute(
            "SELECT coalesce(sum(CASE WHEN status = 'done'"
            " THEN jsonb_array_length(cursor -> 'parents') ELSE processed_offset END), 0)::float8"
            " / greatest(sum(jsonb_array_length(cursor -> 'parents')), 1) AS share"
            " FROM ferryman_tasks WHERE run_id = %s AND kind = 'messages'",
            (run_id,),
        ).fetchone()
        assert done is not None
        return eta.read(conn, run_id, progress), float(done["share"])


@pytest.mark.slow
def test_at_a_quarter_of_a_rate_limited_phase_the_eta_is_within_15_percent(db_url: str) -> None:
    dataset = {"organizations": 50, "people": 20, "deals": 180, "messages_per_deal": 4}
    with (
        DemoCRM.start(
            seed=41, budget_capacity=110, budget_refill_per_s=RATE * 1.1, **dataset
        ) as crm,
        credential(crm.api_key),
        engine_worker(db_url, lanes="migrations:4"),
    ):
        limit = {"tokens_per_second": RATE, "burst": 100}
        run_id = start_run(db_url, request(crm.url, page_size=100, rate_limit=limit))
        found: list[tuple[eta.Estimate, float]] = []

        def quarter() -> bool:
            estimate, share = _estimate(db_url, run_id)
            if estimate is not None and share >= 0.25 and estimate.phase == 3:
                found.append((estimate, time.monotonic()))
                return True
            return False

        wait_for(quarter, 180, "a quarter of the messages phase", interval=0.2)
        wait_for(lambda: state(db_url, run_id)["state"] != "running", 240, "the run", 0.2)
        ended = time.monotonic()
        assert state(db_url, run_id)["state"] == "succeeded"
    estimate, at = found[0]
    actual = ended - at
    line = console.eta_line(estimate)
    assert estimate.bound == "rate limit", (line, estimate, actual)
    assert "for the run (phase 4/4; bound by the source's rate limit:" in line
    assert abs(estimate.seconds - actual) <= 0.15 * actual, (estimate, actual)
