"""Who may be admitted next: one live run per workspace (the database decides that), and among
the runs waiting for a workspace, the oldest first."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Final

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
