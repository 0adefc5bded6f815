"""What a refresh of every live run decides for each without a statement of its own: a run's
observation from the one read of them all (``Prefetched``), or that it needs its own visit; and
what a run is decided from, so that a run none of it changed for is not decided again."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from ferryman_operator.reconcile import admission, visit
from ferryman_operator.reconcile.admission import Candidate
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_operator.reconcile.status import Observation
from ferryman_worker import contract

Live = Mapping[str, Iterable[Mapping[str, Any]]]
"""kopf's ``live`` index: each live run's key to (one) copy of its object, kept current by the
watch; a finished run leaves it."""


@dataclasses.dataclass(frozen=True)
class Prefetched:
    """What one read of every live run found (``contract.live_progress``), by run key; or why
    the database could not be asked."""

    runs: Mapping[str, contract.LiveRun]
    error: str | None = None

    @functools.cached_property
    def busy(self) -> dict[str, str]:
        """Each workspace's running run, of those read."""
        return {
            found.progress.workspace: name
            for name, found in self.runs.items()
            if found.progress.state is contract.RunState.RUNNING
        }


def current(live: Live, key: str) -> Mapping[str, Any] | None:
    """The run ``key``'s object as ``live`` holds it now; None when it finished, went, or is
    being deleted."""
    for body in live.get(key, ()):
        if not admission.candidate(body).deleting:
            return body
    return None


def settled(
    found: contract.LiveRun | None, asked: visit.Asked, busy: Mapping[str, str]
) -> Observation | None:
    """What a visit of the run alone would observe, from what the read of every live run found
    of it (``found``; None: not admitted) and of the workspaces (``busy``: each workspace's
    running run), with no statement of its own; None when it needs one (admission, a
    suspension, a resumption, a retry, a start cut short, or a verification asked for by the
    ferryman.dev/verify annotation)."""
    if asked.retried:
        return None
    run, workers = asked.run, asked.workers
    if found is None:
        refusal = admission.previous_refusal(asked.old)
        if refusal is not None:
            return Observation(workers, refused=refusal)
        return admission.behind(run, asked.ahead, workers) or admission.occupied(
            run, busy.get(run.spec.workspace), workers
        )
    progress = found.progress
    if visit.cut_short(progress) or visit.plan(asked, progress).reread:
        return None
    return Observation(workers, progress=progress, retrying=found.retrying, eta=found.eta)


def inputs(
    body: Mapping[str, Any],
    me: Candidate,
    others: list[Candidate],
    found: Prefetched,
    workers: Wanted,
) -> tuple[Any, ...] | None:
    """Everything a refresh decides the run ``body`` from (its object's version, what the read
    found of it and of its workspace, who is ahead of it, the workers' condition); None when the
    read failed."""
    if found.error is not None:
        return None
    return (
        body["metadata"].get("resourceVersion"),
        found.runs.get(me.key),
        admission.ahead_of(me, others),
        found.busy.get(me.workspace),
        workers,
    )
