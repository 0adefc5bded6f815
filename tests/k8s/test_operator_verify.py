"""The ferryman.dev/verify annotation on the real control plane: the operator hands the
verification of a finished run to the workers as a queue job (``ferryman worker`` processes do
it, not the operator), and its result lands in the run's status."""

from __future__ import annotations

from typing import Any

import pytest
from tests.democrm.server_fixture import DemoCRM
from tests.k8s.operator_bench import Bench, eventually, run_manifest

from ferryman_worker import contract

pytestmark = pytest.mark.k8s


def verification(world: Bench, name: str, request: str) -> dict[str, Any] | None:
    """The run's status.verification once it answers ``request`` and has finished."""
    found = world.status(name).get("verification") or {}
    done = found.get("request") == request and found.get("verdict") != "Pending"
    return found if done else None


def complete(world: Bench, name: str) -> tuple[str, str]:
    [found] = [c for c in world.status(name).get("conditions", []) if c["type"] == "Complete"]
    return found["status"], found["reason"]


def test_the_verify_annotation_has_the_workers_verify_a_finished_run_into_its_status(
    world: Bench, db_url: str
) -> None:
    with DemoCRM.start(seed=13, organizations=150, people=0, deals=0) as crm:
        world.secret(crm.api_key)
        world.operator()
        world.workers(1)
        manifest = run_manifest("checked", crm.url, kinds=["organizations"])
        manifest["metadata"]["annotations"] = {"ferryman.dev/verify": "on-success"}
        world.apply(manifest)  # asked for at creation: verified once it has succeeded
        world.wait_state("checked", "Succeeded", timeout=90)
        # the demo CRM states no total: nothing proves the run complete until it is verified
        assert complete(world, "checked") in {("Unknown", "Unverified"), ("True", "Verified")}
        first = eventually(lambda: verification(world, "checked", "on-success"), 60, "verified")
        assert first["verdict"] == "Verified", first
        [kind] = first["kinds"]
        assert (kind["kind"], kind["listed"], kind["missing"], kind["gone"]) == (
            "organizations",
            150,
            0,
            0,
        )
        eventually(lambda: complete(world, "checked") == ("True", "Verified"), 30, "Verified")
        [verdict] = world.status("checked")["verdicts"]
        assert verdict["verdict"] == "verified", verdict

        with contract.connect(db_url) as conn:
            # A write the ledger lost (only SQL can stand for it: a row and its ledger slot
            # commit together), then the verification asked for again with a new value.
            conn.execute(
                "DELETE FROM ferryman_ledger WHERE kind = 'organizations' AND source_id = '42'"
            )
        world.cp.kubectl(
            "annotate", "mrun", "checked", "-n", world.namespace, "ferryman.dev/verify=again",
            "--overwrite",
        )  # fmt: skip
        again = eventually(lambda: verification(world, "checked", "again"), 60, "verified again")
        with contract.connect(db_url) as conn:
            jobs = conn.execute(
                "SELECT status FROM ferryman_jobs WHERE name = 'ferryman.verify' ORDER BY id"
            ).fetchall()
    assert again["verdict"] == "Differs", again
    assert again["kinds"][0]["missing"] == 1 and again["kinds"][0]["missingIds"] == ["42"]
    assert "1 missing" in again["message"]
    assert [job["status"] for job in jobs] == ["succeeded", "succeeded"]  # done by the workers
    assert world.status("checked")["state"] == "Succeeded"
    # the lost write makes the kind short by it: the run is not complete
    assert eventually(lambda: complete(world, "checked") == ("False", "Short"), 30, "Short")
    [verdict] = world.status("checked")["verdicts"]
    assert (verdict["verdict"], verdict["shortBy"]) == ("short", 1), verdict
    assert "42" in verdict["note"]
