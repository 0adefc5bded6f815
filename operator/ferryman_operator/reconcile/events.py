"""The Events a change of status deserves: admitted, queued, phase started, suspended, resumed,
succeeded, failed (with the cause), cancelled, refused; each said once, on the transition."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from ferryman_operator.reconcile import conditions as cond


@dataclasses.dataclass(frozen=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


def between(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Event]:
    """Events for the move from status ``old`` to status ``new``."""
    events: list[Event] = []
    was, now = old.get("state"), new.get("state")
    old_conditions, new_conditions = old.get("conditions") or [], new.get("conditions") or []
    admitted = cond.find(new_conditions, cond.ADMITTED) or {}
    if now == "Queued" and was != "Queued":
        events.append(Event("Normal", "Queued", str(admitted.get("message", ""))))
    if now == "Running" and was in (None, "", "Pending", "Queued"):
        events.append(Event("Normal", "Admitted", str(admitted.get("message", ""))))
    if now == "Running" and was == "Failed":
        events.append(
            Event("Normal", "Retried", "the failed run was reopened from its checkpoints")
        )
    if new.get("phase") and new.get("phase") != old.get("phase"):
        events.append(Event("Normal", "PhaseStarted", f"phase {new['phase']} started"))
    events += _suspension(old_conditions, new_conditions)
    if now != was:
        events += _ending(now, new, admitted)
    if cond.reason_of(new_conditions, cond.PROGRESSING) == "DatabaseUnavailable" and (
        cond.reason_of(old_conditions, cond.PROGRESSING) != "DatabaseUnavailable"
    ):
        found = cond.find(new_conditions, cond.PROGRESSING) or {}
        events.append(Event("Warning", "DatabaseUnavailable", str(found.get("message", ""))))
    return events


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


def _ending(state: str | None, new: Mapping[str, Any], admitted: Mapping[str, Any]) -> list[Event]:
    message = str(new.get("message") or "")
    if state == "Succeeded":
        return [Event("Normal", "Succeeded", message)]
    if state == "Cancelled":
        return [Event("Normal", "Cancelled", message)]
    if state == "Failed" and admitted.get("status") == "True":
        return [Event("Warning", "Failed", message)]
    if state == "Failed":
        return [Event("Warning", "Refused", message)]
    return []
