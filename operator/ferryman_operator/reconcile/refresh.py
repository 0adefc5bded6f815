"""What a refresh of every live run decides for each without a statement of its own: a run's
observation from the one read of them all, or that it needs its own visit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferryman_operator.reconcile import admission, conditions, lifecycle
from ferryman_operator.reconcile.admission import Candidate
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_operator.reconcile.status import Observation, Refusal
from ferryman_worker import contract
from ferryman_worker.runspec import ConflictPolicy


def settled(
    found: contract.LiveRun | None,
    run: contract.MigrationRun,
    old: Mapping[str, Any],
    annotation: str | None,
    ahead: Candidate | None,
    workers: Wanted,
    busy: Mapping[str, str],
    verify: str | None = None,
) -> Observation | None:
    """What a visit of the run alone would observe, from what the read of every live run found
    of it (``found``; None: not admitted) and of the workspaces (``busy``: each workspace's
    running run), with no statement of its own; None when it needs one (admission, a
    suspension, a resumption, a retry, a start cut short, or a verification asked for by
    ``verify``, the ferryman.dev/verify annotation)."""
    if lifecycle.retry_requested(annotation, old.get("lastRetry")):
        return None
    if found is None:
        refusal = previous_refusal(old)
        if refusal is not None:
            return Observation(workers, refused=refusal)
        return behind(run, ahead, workers) or occupied(run, busy.get(run.spec.workspace), workers)
    progress = found.progress
    running = progress.state is contract.RunState.RUNNING
    if running and progress.tasks_total == 0:
        return None
    if lifecycle.verify_requested(verify, progress.state.finished, answered(progress)):
        return None
    if lifecycle.suspension(run.spec.suspend, running, progress.suspended):
        return None
    return Observation(workers, progress=progress, retrying=found.retrying, eta=found.eta)


def answered(progress: contract.RunProgress) -> str | None:
    """The ferryman.dev/verify value the run's latest verification answers (None: none)."""
    return None if progress.verification is None else progress.verification.request


def behind(
    run: contract.MigrationRun, ahead: Candidate | None, workers: Wanted
) -> Observation | None:
    """Why the run waits (or is refused) for an older queued run of its workspace; None: it is
    first in line."""
    if ahead is None:
        return None
    workspace = run.spec.workspace
    return _held(
        run,
        workers,
        admission.reject_message(workspace, ahead.key),
        admission.behind_message(workspace, ahead.key),
    )


def occupied(
    run: contract.MigrationRun, live_run: str | None, workers: Wanted
) -> Observation | None:
    """Why the run waits (or is refused) while ``live_run`` runs in its workspace, as admission
    would say; None: no run is known to run there (admission decides)."""
    if live_run is None:
        return None
    workspace = run.spec.workspace
    return _held(
        run,
        workers,
        admission.reject_message(workspace, live_run),
        admission.busy_message(workspace, live_run),
    )


def _held(run: contract.MigrationRun, workers: Wanted, refused: str, waiting: str) -> Observation:
    """Refused (``conflictPolicy: Reject``) or waiting, with the words for each."""
    if run.spec.conflict_policy is ConflictPolicy.REJECT:
        return Observation(workers, refused=Refusal("WorkspaceBusy", refused))
    return Observation(workers, waiting=waiting)


def previous_refusal(old: Mapping[str, Any]) -> Refusal | None:
    """A run that was refused stays refused until retried (by the retry annotation)."""
    if old.get("state") != "Failed":
        return None
    found = conditions.find(old.get("conditions") or [], conditions.ADMITTED)
    if found is None or found.get("status") != "False":
        return None
    return Refusal(str(found.get("reason")), str(found.get("message", "")))
