"""The operator's cost follows the live runs: one refresh reads every live run at once, in a
number of database statements that does not grow with the runs, and keeps each run's status
true; a finished run costs it nothing."""

from __future__ import annotations

from typing import Any

import pytest
from net import free_port
from scrape import scrape, total
from tests.democrm.server_fixture import DemoCRM
from tests.k8s.operator_bench import Bench, eventually, run_manifest

pytestmark = pytest.mark.k8s

ORGS: dict[str, Any] = {"kinds": ["organizations"]}
SLOW = {"seed": 3, "organizations": 3000, "people": 0, "deals": 0, "latency_ms": 1000}
PAGED: dict[str, Any] = {"kinds": ["organizations"], "options": {"pageSize": 25, "stripes": 2}}
"""120 pages of a second each, two at a time: a run that goes on for a minute or more."""
PER_REFRESH = 4
"""Statements one refresh sends however many runs are live (``contract.live_progress``)."""


def operator(world: Bench) -> int:
    """An operator serving its metrics on the returned port; its pool specs checked once (no
    statement of theirs in the counts)."""
    port = free_port()
    world.operator(FERRYMAN_OPERATOR_METRICS_PORT=str(port), FERRYMAN_OPERATOR_POOL_INTERVAL="3600")
    return port


def counters(port: int) -> tuple[float, float]:
    """The operator's refreshes and database statements so far."""
    _, samples = scrape(port)
    return (
        total(samples, "ferryman_operator_refreshes_total"),
        total(samples, "ferryman_operator_database_statements_total"),
    )


def statements_per_refresh(port: int, refreshes: int = 6) -> tuple[float, float]:
    """Over the next ``refreshes`` refreshes (and nothing else happening): how many there were
    and the statements sent meanwhile."""
    first_refreshes, first_statements = counters(port)
    eventually(
        lambda: counters(port)[0] >= first_refreshes + refreshes, 60, f"{refreshes} refreshes"
    )
    last_refreshes, last_statements = counters(port)
    return last_refreshes - first_refreshes, last_statements - first_statements


def state_of(world: Bench, name: str) -> dict[str, Any]:
    found = world.status(name)
    conditions = {c["type"]: c for c in found.get("conditions", [])}
    return {"state": found.get("state"), **conditions}


def test_one_refresh_reads_every_live_run_in_statements_that_do_not_grow_with_them(
    world: Bench,
) -> None:
    with DemoCRM.start(**SLOW) as crm:
        world.secret(crm.api_key)
        port = operator(world)
        world.workers(1)
        world.apply(run_manifest("moving", crm.url, workspace="a", **PAGED))
        world.apply(run_manifest("paused", crm.url, workspace="b", suspend=True, **PAGED))
        eventually(lambda: world.status("moving").get("rowsWritten", 0) > 0, 60, "rows moving")
        eventually(lambda: world.status("paused").get("state") == "Running", 30, "paused admitted")
        few = statements_per_refresh(port)
        for number in range(4):  # queued behind the running runs, and more suspended ones
            workspace = "a" if number % 2 else "b"
            world.apply(run_manifest(f"queued-{number}", crm.url, workspace=workspace, **PAGED))
            world.apply(
                run_manifest(
                    f"held-{number}", crm.url, workspace=f"h{number}", suspend=True, **ORGS
                )
            )
        for number in range(4):
            world.wait_state(f"queued-{number}", "Queued", timeout=30)
            eventually(
                lambda n=number: (
                    state_of(world, f"held-{n}").get("Progressing", {}).get("reason") == "Suspended"
                ),
                30,
                f"held-{number} suspended",
            )
        many = statements_per_refresh(port)
        moving = world.status("moving")
        assert moving["state"] == "Running" and moving.get("eta", {}).get("message")
        later = eventually(
            lambda: (
                world.status("moving")["rowsWritten"] > moving["rowsWritten"]
                and world.status("moving")
            ),
            30,
            "the running run's rows to move on its status",
        )
        assert later["tasksDone"] >= moving["tasksDone"]
        for number in range(4):
            queued = state_of(world, f"queued-{number}")
            assert queued["state"] == "Queued", queued
            live = "moving" if number % 2 else "paused"
            older = "queued-1" if number == 3 else "queued-0" if number == 2 else None
            assert (older or live) in queued["Admitted"]["message"], queued
        paused = state_of(world, "paused")
        assert paused["Progressing"]["reason"] == "Suspended"
    (refreshes_few, sent_few), (refreshes_many, sent_many) = few, many
    # 2 live runs, then 10: the same few statements per refresh (one refresh may be under way
    # at each end of a window)
    assert sent_few <= PER_REFRESH * (refreshes_few + 1), few
    assert sent_many <= PER_REFRESH * (refreshes_many + 1), many


def test_a_finished_run_costs_no_refresh_while_a_live_one_is_refreshed(world: Bench) -> None:
    """A finished run is read by no refresh: the statements per refresh are those of the one
    live run, with a finished one beside it."""
    with DemoCRM.start(seed=9, organizations=100, people=0, deals=0) as crm:
        world.secret(crm.api_key)
        port = operator(world)
        world.workers(1)
        world.apply(run_manifest("done", crm.url, workspace="early", **ORGS))
        world.apply(run_manifest("held", crm.url, workspace="late", suspend=True, **ORGS))
        world.wait_state("done", "Succeeded", timeout=60)
        eventually(lambda: world.status("held").get("state") == "Running", 30, "held admitted")
        refreshes, sent = statements_per_refresh(port)
        assert refreshes >= 6 and sent <= PER_REFRESH * (refreshes + 1), (refreshes, sent)
        with_one = sent / refreshes
        world.cp.kubectl("delete", "mrun", "held", "-n", world.namespace)
        refreshes, sent = statements_per_refresh(port)
    assert sent == 0, (refreshes, sent, with_one)  # no live run, no statement
