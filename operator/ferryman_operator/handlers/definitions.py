"""MigrationProvider and MigrationMapping handlers: a created or changed one examines again the
refused runs of its namespace that await it (kopf's ``awaiting`` index of MigrationRuns; the
decision is ``reconcile.readmission``'s), so a run refused because it named a provider or
mapping that was missing or invalid is admitted once it exists and fits. Watch events only: kopf
writes nothing onto these resources (no finalizer, no annotations)."""

from __future__ import annotations

from typing import Any

import kopf

from ferryman_operator import crd
from ferryman_operator.reconcile import readmission
from ferryman_operator.reconcile.admission import Candidate, candidate
from ferryman_operator.runs import Runs


def register(registry: kopf.OperatorRegistry, runs: Runs) -> None:
    for plural in (crd.PROVIDERS, crd.MAPPINGS):
        _watch(registry, runs, plural)


def _watch(registry: kopf.OperatorRegistry, runs: Runs, plural: str) -> None:
    @kopf.on.event(crd.GROUP, crd.VERSION, plural, id=f"{plural}-changed", registry=registry)
    async def changed(
        type: str | None,
        name: str,
        namespace: str,
        awaiting: kopf.Index[readmission.Named, dict[str, Any]],
        waiting: kopf.Index[str, Candidate],
        **_: Any,
    ) -> None:
        if not readmission.wakes(type):
            return
        bodies = sorted(awaiting.get((plural, namespace, name), []), key=candidate)
        await runs.reexamine_all(bodies, waiting)
