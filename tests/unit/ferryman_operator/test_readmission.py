"""Which refused runs a MigrationProvider or MigrationMapping wakes when it is created or
changed, decided without a cluster. (On the real control plane: a run refused for a missing
provider, then mapping, is admitted once each exists: tests/k8s/test_operator_definitions.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from ferryman_operator.reconcile import readmission

PROVIDER = ("migrationproviders", "team", "crm")
MAPPING = ("migrationmappings", "team", "sales")


def run(
    reason: str | None,
    state: str = "Failed",
    admitted: str = "False",
    mapping: dict[str, str] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    conditions = (
        []
        if reason is None
        else [{"type": "Admitted", "status": admitted, "reason": reason, "message": "..."}]
    )
    spec: dict[str, Any] = {"workspace": "acme", "source": {"provider": "crm"}}
    if mapping is not None:
        spec["mapping"] = mapping
    return {
        "metadata": {"name": "r", "namespace": "team", **meta},
        "spec": spec,
        "status": {"state": state, "conditions": conditions},
    }


@pytest.mark.parametrize("reason", sorted(readmission.REASONS))
def test_a_run_refused_for_its_provider_or_mapping_awaits_both(reason: str) -> None:
    assert readmission.awaited(run(reason, mapping={"name": "sales"})) == [PROVIDER, MAPPING]
    assert readmission.awaited(run(reason)) == [PROVIDER]


@pytest.mark.parametrize(
    "body",
    [
        run("WorkspaceBusy"),  # conflictPolicy Reject: no definition mends it
        run("SourceNotAllowed"),
        run("CredentialMissing"),
        run("ProviderUnreadable"),  # the operator's RBAC, not the resource
        run("InvalidSpec", mapping={"file": "mapping.yaml"}),
        run("ProviderNotFound", state="Running", admitted="True"),  # admitted since
        run("Admitted", state="Failed", admitted="True"),  # failed while running
        run(None, state="Pending"),
        run("ProviderNotFound", deletionTimestamp="2026-12-01T12:00:00Z"),
        {"metadata": {"name": "new", "namespace": "team"}, "spec": {}},
    ],
)
def test_no_other_run_awaits_anything(body: dict[str, Any]) -> None:
    assert readmission.awaited(body) == []


def test_every_event_but_a_deletion_wakes_the_runs_that_await_it() -> None:
    assert [readmission.wakes(t) for t in (None, "ADDED", "MODIFIED", "DELETED")] == [
        True,
        True,
        True,
        False,
    ]
