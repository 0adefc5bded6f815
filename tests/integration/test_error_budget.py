"""A kind more of whose records are refused than the run's error budget allows fails its run,
naming the kind and the most frequent reasons: the demo CRM serving a majority of malformed
organizations, against a real PostgreSQL (by default, more than half refused fails the run)."""

from __future__ import annotations

from typing import Any

import pytest
from migration import credential, engine_worker, request, start_run, wait_finished
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker.db import connect

DATASET = {"organizations": 300, "people": 0, "deals": 0, "malformed_rate": 0.7}


def _run(db_url: str, **options: Any) -> tuple[dict[str, Any], dict[str, Any], int]:
    """A run of the organizations; its final state, the kind's verdict and how many
    organizations the demo CRM served malformed."""
    with DemoCRM.start(seed=5, **DATASET) as crm, credential(crm.api_key), engine_worker(db_url):
        malformed = len(crm.truth()["organizations"]["malformed"])
        run = request(crm.url, kinds=["organizations"], **options)
        final = wait_finished(db_url, start_run(db_url, run))
    with connect.connect(db_url) as conn:
        verdict = conn.execute("SELECT * FROM ferryman_run_kinds").fetchone()
    assert verdict is not None
    return final, verdict, malformed


def test_a_kind_refused_beyond_the_default_budget_fails_its_run_naming_the_reasons(
    db_url: str,
) -> None:
    final, verdict, malformed = _run(db_url)
    assert malformed > 150  # more than half
    assert (final["state"], verdict["verdict"]) == ("failed", "refused")
    error = final["error"]
    assert (
        f"organizations: {malformed:,} of the 300 of its records were refused, more than its"
        " error budget (50%) allows: " in error
    )
    assert " x name: " in error  # the most frequent reasons, with their counts
    assert "raise spec.errorBudget" in error


@pytest.mark.parametrize(
    "budget", [{"share": 0.9, "kinds": {}}, {"share": 0.0, "kinds": {"organizations": 0.9}}]
)
def test_a_budget_that_allows_the_share_refused_lets_the_run_succeed(
    db_url: str, budget: dict[str, Any]
) -> None:
    final, verdict, malformed = _run(db_url, error_budget=budget)
    assert final["state"] == "succeeded", final["error"]
    assert final["rows_failed"] == malformed
    assert verdict["verdict"] == "unverified"  # the demo CRM's offsets state no total
