"""MigrationRun handlers: create, update (spec, suspend, the retry annotation), the indexes the
fleet-wide refresh reads (it refreshes status and admits queued runs) and the one of refused runs
that await a provider or mapping (``handlers.definitions`` wakes them), and delete (cancel,
behind our finalizer)."""

from __future__ import annotations

import copy
from typing import Any

import kopf

from ferryman_operator import crd
from ferryman_operator.errors import DatabaseUnavailable
from ferryman_operator.fleet import Fleet
from ferryman_operator.metrics import OperatorMetrics
from ferryman_operator.reconcile import lifecycle, readmission
from ferryman_operator.reconcile.admission import Candidate, candidate
from ferryman_operator.runs import Runs
from ferryman_worker.runspec import VERIFY_ANNOTATION

RESOURCE = (crd.GROUP, crd.VERSION, crd.PLURAL)
BACKOFF = 5.0
"""Seconds before a handler that raised something unexpected runs again (kopf's default: 60)."""


def register(
    registry: kopf.OperatorRegistry,
    runs: Runs,
    metrics: OperatorMetrics,
    fleet: Fleet,
) -> None:
    _reconciled(registry, runs, metrics)
    _indexed(registry)
    _watched(registry, runs, fleet)
    _ended(registry, runs, metrics)


def _reconciled(registry: kopf.OperatorRegistry, runs: Runs, metrics: OperatorMetrics) -> None:
    """The index of every run by workspace, and the reconcile of a run created or changed."""

    @kopf.index(*RESOURCE, id="waiting", registry=registry)
    def waiting(body: kopf.Body, **_: Any) -> dict[str, Candidate]:
        """Every run by workspace: who is first in line for admission."""
        me = candidate(body)
        return {me.workspace: me}

    async def sync(
        handler: str, body: kopf.Body, patch: kopf.Patch, waiting: kopf.Index[str, Candidate]
    ) -> None:
        metrics.runs.follow(waiting)  # counted at scrape time from kopf's live index
        workspace = (body.get("spec") or {}).get("workspace", "")
        with metrics.handling(handler):
            await runs.sync(body, patch, list(waiting.get(workspace, [])), handler=handler)

    @kopf.on.create(*RESOURCE, id="created", backoff=BACKOFF, registry=registry)
    async def created(
        body: kopf.Body, patch: kopf.Patch, waiting: kopf.Index[str, Candidate], **_: Any
    ) -> None:
        await sync("created", body, patch, waiting)

    @kopf.on.update(*RESOURCE, id="updated", backoff=BACKOFF, registry=registry)
    async def updated(
        body: kopf.Body, patch: kopf.Patch, waiting: kopf.Index[str, Candidate], **_: Any
    ) -> None:
        await sync("updated", body, patch, waiting)


def _indexed(registry: kopf.OperatorRegistry) -> None:
    """The indexes of the live runs (the fleet-wide refresh's) and of the refused runs that
    await a provider or mapping."""

    @kopf.index(*RESOURCE, id="live", when=live, registry=registry)
    def live_runs(body: kopf.Body, **_: Any) -> dict[str, dict[str, Any]]:
        """Every live run's object (a copy), for the fleet-wide refresh; a finished run leaves."""
        return {candidate(body).key: copy.deepcopy(dict(body))}

    @kopf.index(*RESOURCE, id="awaiting", registry=registry)
    def awaiting(body: kopf.Body, **_: Any) -> dict[readmission.Named, dict[str, Any]]:
        """Each refused run (a copy) under the provider and mapping it awaits, if any."""
        named = readmission.awaited(body)
        return {key: copy.deepcopy(dict(body)) for key in named}


def _watched(registry: kopf.OperatorRegistry, runs: Runs, fleet: Fleet) -> None:
    """Watch events: a run just refused for its provider or mapping, and the end of the listing."""

    @kopf.on.event(*RESOURCE, id="refused", when=awaits, registry=registry)
    async def refused(
        type: str | None, body: kopf.Body, waiting: kopf.Index[str, Candidate], **_: Any
    ) -> None:
        """A run just refused for its provider or mapping is examined once more: one created
        while it was being refused (``kubectl apply`` of a folder) woke nothing yet. Its
        status unchanged, nothing is written, so no event follows."""
        if type == "MODIFIED":
            await runs.reexamine_all([dict(body)], waiting)

    @kopf.on.event(*RESOURCE, id="listed", when=lambda **_: not fleet.listed, registry=registry)
    async def listed(
        live: kopf.Index[str, dict[str, Any]], waiting: kopf.Index[str, Candidate], **_: Any
    ) -> None:
        """kopf calls no handler before it listed every run: the refresh may begin (on the
        event loop: an asyncio.Event is set)."""
        fleet.list_done(live, waiting)


def _ended(registry: kopf.OperatorRegistry, runs: Runs, metrics: OperatorMetrics) -> None:
    """A run's end: finished (its TTL), or deleted (cancelled, behind our finalizer)."""

    @kopf.daemon(
        *RESOURCE, id="finished", when=finished, cancellation_timeout=1.0, registry=registry
    )
    async def ended(body: kopf.Body, stopped: kopf.DaemonStopped, **_: Any) -> None:
        """A finished run costs no timer: its memory goes, and it waits for its TTL, if any."""
        runs.forget(body)
        await runs.expire_when_due(body, stopped)

    @kopf.on.delete(*RESOURCE, id="deleted", backoff=BACKOFF, registry=registry)
    async def deleted(body: kopf.Body, **_: Any) -> None:
        try:
            with metrics.handling("deleted"):
                await runs.cancel(body)
        except DatabaseUnavailable as exc:
            raise kopf.TemporaryError(f"cannot cancel the run: {exc}", delay=5) from None


def live(status: kopf.Status, annotations: kopf.Annotations, **_: Any) -> bool:
    """A run that is not finished (new, queued, running, suspended), or whose verification
    the ferryman.dev/verify annotation asked for is not in its status yet: refreshed every
    interval (``fleet``)."""
    found = status or {}
    verify = (annotations or {}).get(VERIFY_ANNOTATION)
    return found.get("state") not in lifecycle.FINISHED or lifecycle.verify_pending(
        verify, found.get("verification")
    )


def awaits(body: kopf.Body, **_: Any) -> bool:
    """A run refused for the provider or mapping it names (``reconcile.readmission``)."""
    return bool(readmission.awaited(body))


def finished(status: kopf.Status, annotations: kopf.Annotations, **_: Any) -> bool:
    return not live(status, annotations)
