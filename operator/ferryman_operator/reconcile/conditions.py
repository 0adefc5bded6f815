"""Conditions in the Kubernetes shape (metav1.Condition): one per type, CamelCase reasons, and a
``lastTransitionTime`` that moves only when the condition's status changes."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

ADMITTED: Final = "Admitted"
PROGRESSING: Final = "Progressing"
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"
WORKERS_READY: Final = "WorkersReady"
TYPES: Final = (ADMITTED, PROGRESSING, COMPLETE, FAILED, WORKERS_READY)
MESSAGE: Final = 32768
"""The longest message a condition may carry (metav1.Condition's)."""

Status = Literal["True", "False", "Unknown"]


@dataclasses.dataclass(frozen=True)
class Wanted:
    """A condition as the operator wants it now, before its times are filled in."""

    type: str
    status: Status
    reason: str
    message: str = ""


def timestamp(now: datetime.datetime) -> str:
    """RFC 3339 in UTC with a Z, to the second, as Kubernetes writes times."""
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge(
    previous: Sequence[Mapping[str, Any]],
    wanted: Iterable[Wanted],
    now: datetime.datetime,
    generation: int | None,
) -> list[dict[str, Any]]:
    """The new conditions list: ``wanted`` ones replace those of their type, keeping the old
    ``lastTransitionTime`` unless the status changed; conditions of other types (another
    writer's) are kept as they are. Order: the known types first, then the others."""
    old = {str(c.get("type")): dict(c) for c in previous if c.get("type")}
    result = dict(old)
    for want in wanted:
        before = old.get(want.type)
        moved = before is None or before.get("status") != want.status
        result[want.type] = {
            "type": want.type,
            "status": want.status,
            "reason": want.reason,
            "message": want.message,
            "lastTransitionTime": timestamp(now)
            if moved or before is None or not before.get("lastTransitionTime")
            else before["lastTransitionTime"],
            "observedGeneration": generation,
        }
    ordered = [result.pop(kind) for kind in TYPES if kind in result]
    return ordered + [result[key] for key in sorted(result)]


def find(conditions: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def holds(conditions: Sequence[Mapping[str, Any]], kind: str, reason: str | None = None) -> bool:
    """True if the condition ``kind`` is True (and, when given, has ``reason``)."""
    found = find(conditions, kind)
    return (
        found is not None
        and found.get("status") == "True"
        and (reason is None or found.get("reason") == reason)
    )


def reason_of(conditions: Sequence[Mapping[str, Any]], kind: str) -> str | None:
    found = find(conditions, kind)
    return None if found is None else str(found.get("reason"))
