"""Events, posted through kopf (which batches them and attaches them to the object)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import kopf

from ferryman_operator.reconcile.events import Event

MAX_MESSAGE = 1000


def post(body: Mapping[str, Any], events: Iterable[Event]) -> None:
    for event in events:
        kopf.event(
            dict(body),
            type=event.type,
            reason=event.reason,
            message=event.message[:MAX_MESSAGE],
        )
