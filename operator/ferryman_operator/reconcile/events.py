"""The Events a change of status deserves: admitted, queued, phase started, suspended, resumed,
a task failing for a cause it names, succeeded, failed (with the cause), cancelled,
refused, a verification's result; each said once, on the transition."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final, Literal

from ferryman_operator.reconcile import conditions as cond
from ferryman_worker.contract import CAUSES, RunProgress, RunState

_ENDED = frozenset({RunState.SUCCEEDED.value, RunState.FAILED.value, RunState.CANCELLED.value})


@dataclasses.dataclass(frozen=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


def between(
    old: Mapping[str, Any], new: Mapping[str, Any], run: RunProgress | None = None
) -> list[Event]:
    """Events for the move from status ``old`` to status ``new``; ``run`` is the database's
    aggregate that ``new`` was made from (None when the database was not asked)."""
    events: list[Event] = []
    was, now = old.get("state"), new.get("state")
    old_conditions, new_conditions = old.get("conditions") or [], new.get("conditions") or []
    admitted = cond.find(new_conditions, cond.ADMITTED) or {}
    if now == "Queued" and was != "Queued":
        events.append(Event("Normal", "Queued", str(admitted.get("message", ""))))
    refused = was == "Failed" and cond.find(old_conditions, cond.ADMITTED) is not None
    refused = refused and not cond.holds(old_conditions, cond.ADMITTED)
    if now == "Running" and (was in (None, "", "Pending", "Queued") or refused):
        events.append(Event("Normal", "Admitted", str(admitted.get("message", ""))))
    if now == "Running" and was == "Failed" and not refused:
        events.append(
            Event("Normal", "Retried", "the failed run was reopened from its checkpoints")
        )
    events += phases_started(old, run)
    events += _suspension(old_conditions, new_conditions)
    events += _stalled(old_conditions, new_conditions)
    if now != was:
        events += _ending(now, new, admitted)
    events += _verified(old.get("verification"), new.get("verification"))
    if cond.reason_of(new_conditions, cond.PROGRESSING) == "DatabaseUnavailable" and (
        cond.reason_of(old_conditions, cond.PROGRESSING) != "DatabaseUnavailable"
    ):
        found = cond.find(new_conditions, cond.PROGRESSING) or {}
        events.append(Event("Warning", "DatabaseUnavailable", str(found.get("message", ""))))
    return events


def phases_started(old: Mapping[str, Any], run: RunProgress | None) -> list[Event]:
    """A PhaseStarted for every phase that opened since ``old`` was observed, in order: a phase
    shorter than the status refresh, or a whole short run, still gets its Event. The phases
    after the last observed one up to the open one (all of them once the run succeeded); a
    retried run's reopened phase once; nothing for a run that stays ended."""
    if run is None or not run.phase_names:
        return []
    last = len(run.phase_names) - 1
    upto = min(run.phase_index, last)
    was = old.get("state")
    if was in _ENDED:
        reopened = was == RunState.FAILED.value and run.state is RunState.RUNNING
        after = upto - 1 if reopened else last
    elif old.get("phase") in run.phase_names:
        after = run.phase_names.index(old["phase"])
    else:
        after = -1  # not admitted, or no phase seen yet
    return [
        Event("Normal", "PhaseStarted", f"phase {name} started")
        for name in run.phase_names[after + 1 : upto + 1]
    ]


def _suspension(old: list[Any], new: list[Any]) -> list[Event]:
    before = cond.reason_of(old, cond.PROGRESSING) == "Suspended"
    after = cond.reason_of(new, cond.PROGRESSING) == "Suspended"
    if after and not before:
        return [
            Event("Normal", "Suspended", "spec.suspend is true: tasks stop at their next window")
        ]
    if before and not after and cond.reason_of(new, cond.PROGRESSING) in ("Running", "Retrying"):
        return [
            Event("Normal", "Resumed", "spec.suspend is false: tasks continue from checkpoints")
        ]
    return []


def _stalled(old: list[Any], new: list[Any]) -> list[Event]:
    """A Warning when a task starts failing for a cause the run names (or for another)."""
    found = cond.find(new, cond.PROGRESSING) or {}
    reason = found.get("reason")
    if reason not in CAUSES or cond.reason_of(old, cond.PROGRESSING) == reason:
        return []
    return [Event("Warning", str(reason), str(found.get("message", "")))]


def _unproven(new: Mapping[str, Any]) -> list[Event]:
    """An ``Unverified`` Event for a run that succeeded without proving it is complete."""
    found = cond.find(new.get("conditions") or [], cond.COMPLETE) or {}
    if found.get("reason") != "Unverified":
        return []
    return [Event("Normal", "Unverified", str(found.get("message", "")))]


VERIFIED: Final[dict[str, Literal["Normal", "Warning"]]] = {
    "Verified": "Normal",
    "Differs": "Warning",
    "Failed": "Warning",
}
"""The Event of a finished verification, by its verdict: ``Verified``, or a Warning
``VerificationDiffers`` / ``VerificationFailed``."""


def _verified(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[Event]:
    """An Event when a verification's result lands (a new request's, or a pending one's)."""
    now, was = new or {}, old or {}
    verdict = now.get("verdict")
    if verdict not in VERIFIED:
        return []
    if (was.get("request"), was.get("verdict")) == (now.get("request"), verdict):
        return []
    reason = "Verified" if verdict == "Verified" else f"Verification{verdict}"
    return [Event(VERIFIED[verdict], reason, str(now.get("message", "")))]


def _ending(state: str | None, new: Mapping[str, Any], admitted: Mapping[str, Any]) -> list[Event]:
    message = str(new.get("message") or "")
    if state == "Succeeded":
        return [Event("Normal", "Succeeded", message), *_unproven(new)]
    if state == "Cancelled":
        return [Event("Normal", "Cancelled", message)]
    if state == "Failed" and admitted.get("status") == "True":
        return [Event("Warning", "Failed", message)]
    if state == "Failed":
        return [Event("Warning", "Refused", message)]
    return []
