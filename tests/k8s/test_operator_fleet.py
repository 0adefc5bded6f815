"""The operator's cost follows the live runs: a finished run gets no refresh (its timer stops
once its object shows the end), while a live run is refreshed every interval."""

from __future__ import annotations

import json

import pytest
from tests.democrm.server_fixture import DemoCRM
from tests.k8s.operator_bench import Bench, eventually, run_manifest

pytestmark = pytest.mark.k8s

ORGS = {"kinds": ["organizations"]}


def refreshes(output: str, key: str) -> int:
    """How many times kopf ran the refresh timer of the run ``key`` (its own log lines)."""
    count = 0
    for line in output.splitlines():
        if "Timer 'refresh'" not in line:
            continue
        entry = json.loads(line)
        count += entry.get("object") == key and "succeeded" in entry.get("message", "")
    return count


def test_a_finished_run_is_refreshed_no_more_while_a_live_one_is(world: Bench) -> None:
    with DemoCRM.start(seed=9, organizations=100, people=0, deals=0) as crm:
        world.secret(crm.api_key)
        operator = world.operator()
        world.workers(1)
        world.apply(run_manifest("done", crm.url, workspace="early", **ORGS))
        world.apply(run_manifest("held", crm.url, workspace="late", suspend=True, **ORGS))
        world.wait_state("done", "Succeeded", timeout=60)
        done, held = f"{world.namespace}/done", f"{world.namespace}/held"
        eventually(lambda: refreshes(operator.output(), held) >= 1, 30, "a refresh of the held run")
        before = refreshes(operator.output(), done)
        live_before = refreshes(operator.output(), held)
        eventually(
            lambda: refreshes(operator.output(), held) >= live_before + 5,
            60,
            "five more refreshes of the live run",
        )
        after = refreshes(operator.output(), done)
    assert after - before <= 1  # one may have begun before its object showed the end
