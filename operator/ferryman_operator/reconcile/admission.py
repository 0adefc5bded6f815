"""Who may be admitted next: one live run per workspace (the database decides that), and among
the runs waiting for a workspace, the oldest first; and the words of a run held back, waiting
(``Queued``) or refused (``conflictPolicy: Reject``), or refused before and so until retried."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ferryman_operator.reconcile import conditions
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_operator.reconcile.status import Observation, Refusal
from ferryman_worker import contract
from ferryman_worker.runspec import ConflictPolicy

WAITING_STATES: Final = frozenset({None, "", "Pending", "Queued"})


@dataclasses.dataclass(frozen=True, order=True)
class Candidate:
    """A MigrationRun as the operator's index knows it: ordered by creation, then name."""

    created: str
    """metadata.creationTimestamp (RFC 3339, so it sorts as text)."""

    key: str
    """namespace/name."""

    workspace: str
    state: str | None = None
    deleting: bool = False

    @property
    def waiting(self) -> bool:
        """Not admitted yet, not refused, not being deleted: Pending or Queued."""
        return self.state in WAITING_STATES and not self.deleting


def candidate(body: Mapping[str, Any]) -> Candidate:
    """The run ``body`` (a MigrationRun object) as the index knows it."""
    meta, spec = body.get("metadata", {}), body.get("spec") or {}
    return Candidate(
        created=str(meta.get("creationTimestamp", "")),
        key=f"{meta.get('namespace')}/{meta.get('name')}",
        workspace=str(spec.get("workspace", "")),
        state=(body.get("status") or {}).get("state"),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def ahead_of(me: Candidate, others: Iterable[Candidate]) -> Candidate | None:
    """The oldest other run of ``me``'s workspace still waiting and created before it, or None
    when ``me`` is first in line (and may try admission)."""
    older = sorted(
        other
        for other in others
        if other.key != me.key and other.workspace == me.workspace and other.waiting and other < me
    )
    return older[0] if older else None


def busy_message(workspace: str, live_run: str) -> str:
    return (
        f"workspace {workspace} has a live run, {live_run}: this run waits in the queue and "
        "starts by itself when that run ends"
    )


def behind_message(workspace: str, older: str) -> str:
    return f"workspace {workspace} has an older queued run, {older}: this run starts after it"


def reject_message(workspace: str, live_run: str) -> str:
    return (
        f"workspace {workspace} has a live run, {live_run}, and spec.conflictPolicy is Reject: "
        "this run will not start (retry it with the ferryman.dev/retry annotation once that run "
        "ended, or use conflictPolicy Queue)"
    )


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
        reject_message(workspace, ahead.key),
        behind_message(workspace, ahead.key),
    )


def occupied(
    run: contract.MigrationRun, live_run: str | None, workers: Wanted
) -> Observation | None:
    """Why the run waits (or is refused) while ``live_run`` runs in its workspace, as admission
    would say; None: no run is known to run there (admission decides)."""
    return None if live_run is None else busy(run, live_run, workers)


def busy(run: contract.MigrationRun, live_run: str, workers: Wanted) -> Observation:
    """Why the run waits (or is refused) while ``live_run`` runs in its workspace."""
    workspace = run.spec.workspace
    return _held(
        run,
        workers,
        reject_message(workspace, live_run),
        busy_message(workspace, live_run),
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
