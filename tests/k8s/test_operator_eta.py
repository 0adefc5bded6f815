"""A rate-bound run's ETA in its MigrationRun, read back from the API server (a status field the
CRD did not declare would be pruned there): ``status.eta``, the Progressing condition, the
message and the ETA column of ``kubectl get -o wide``; gone once the run has finished."""

from __future__ import annotations

from typing import Any

import pytest
from tests.democrm.server_fixture import DemoCRM
from tests.k8s.operator_bench import Bench, eventually, run_manifest, table

pytestmark = pytest.mark.k8s

RATE = 60.0  # tokens/s the run declares: deals 2 listings, then 60 x (a listing + ~2 bodies)
DATA = {"seed": 5, "organizations": 10, "people": 0, "deals": 60, "messages_per_deal": 2}


def wide_eta(bench: Bench, name: str) -> str:
    """The ETA cell of ``kubectl get mrun -o wide``."""
    [row] = [found for found in table(bench, "-o", "wide") if found["NAME"] == name]
    return row["ETA"]


def test_a_rate_bound_run_shows_its_eta_and_what_bounds_it(world: Bench) -> None:
    # The source's own quota never binds: it refills faster than the run's declared rate and
    # holds several rounds of listings (a round is fetchThreads listings of 20 tokens).
    budget = {"budget_capacity": 400, "budget_refill_per_s": RATE * 1.2}
    with DemoCRM.start(**DATA, **budget) as crm:
        world.secret(crm.api_key)
        world.operator()
        world.workers(1)
        manifest = run_manifest("eta", crm.url, kinds=["deals", "messages"])
        manifest["spec"]["source"]["rateLimit"] = {"tokensPerSecond": RATE, "burst": 40}
        manifest["spec"]["options"] = {"pageSize": 50}
        world.apply(manifest)

        def bound() -> dict[str, Any] | None:
            found = world.status("eta")
            assert found.get("state") not in ("Succeeded", "Failed"), f"eta ended {found}"
            eta = found.get("eta") or {}
            return found if eta.get("boundBy") == "RateLimit" and eta.get("seconds") else None

        shown = eventually(bound, 90, "status.eta bound by the rate limit")
        eta = shown["eta"]
        assert shown["state"] == "Running" and shown["phase"] == "messages"
        assert eta["atLeastSeconds"] == eta["seconds"] and 0 < eta["seconds"] < 120
        assert eta["message"].startswith("ETA ") and eta["message"].endswith(f" at {RATE:g}/s)")
        assert "for the run (bound by the source's rate limit: " in eta["message"]
        [phase] = eta["phases"]  # the last phase: the run's is its own
        assert phase["phase"] == "messages" and phase["seconds"] == eta["seconds"]
        assert phase["message"].startswith("phase 2/2 (messages): ETA ")
        progressing = next(c for c in shown["conditions"] if c["type"] == "Progressing")
        assert progressing["message"].endswith(f"; {eta['message']}")
        assert shown["message"] == progressing["message"]
        assert wide_eta(world, "eta") not in ("", "<none>")
        final = world.wait_state("eta", "Succeeded", timeout=120)
    assert "eta" not in final  # removed from the object once the run has finished
    assert wide_eta(world, "eta") in ("", "<none>")
