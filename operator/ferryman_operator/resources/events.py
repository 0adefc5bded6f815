"""A run's Events: posted through kopf inside a handler of the run (kopf batches them and
attaches them to the object), or made through the API outside one (a refresh, a run examined
again), where kopf's event queue is not there."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import kopf

from ferryman_operator.kube import Kube
from ferryman_operator.reconcile.events import Event

MAX_MESSAGE = 1000


def post(body: Mapping[str, Any], events: Iterable[Event]) -> None:
    """Post ``events`` on the run ``body`` through kopf, from a handler of it."""
    for event in events:
        kopf.event(
            dict(body),
            type=event.type,
            reason=event.reason,
            message=event.message[:MAX_MESSAGE],
        )


async def create(kube: Kube, body: Mapping[str, Any], events: Iterable[Event]) -> None:
    """Make ``events`` on the run ``body`` through the API, outside a handler of it."""
    for event in events:
        await kube.post_event(dict(body), event.type, event.reason, event.message[:MAX_MESSAGE])
