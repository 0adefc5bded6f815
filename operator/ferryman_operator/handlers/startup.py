"""kopf's login (a fresh registry has none) and its settings: our finalizer, progress kept in
annotations (``status`` holds only declared fields), no Events for kopf's routine log lines, no
peering (the Lease decides), no watch of every CRD, a deleted run released soon after its timer
exits."""

from __future__ import annotations

import logging
from typing import Any

import kopf

FINALIZER = "ferryman.dev/cancel-run"
PREFIX = "kopf.ferryman.dev"
TIMER_EXIT_POLL = 1.0
"""Seconds between kopf's checks that a deleted run's refresh timer has exited: kopf removes the
finalizer only then, and its default (60 s) kept a run whose refresh was in flight when it was
deleted (its own TTL deletion, or kubectl delete) for a minute."""


def register(registry: kopf.OperatorRegistry, request_timeout: float) -> None:
    """``request_timeout``: seconds any of kopf's API requests may take (connecting too), so a
    silent API server cannot hold a handler's write past the Lease."""

    @kopf.on.login(id="login", registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        """In-cluster service account, else KUBECONFIG: the same as the kubernetes client."""
        return kopf.login_via_client(**kwargs)

    @kopf.on.startup(id="configure", registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.persistence.finalizer = FINALIZER
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=PREFIX, key="last-handled-configuration"
        )
        settings.posting.level = logging.WARNING
        settings.background.cancellation_polling = TIMER_EXIT_POLL
        settings.peering.standalone = True
        # One look at the API's resources at start-up, no watch of every CRD (which would need
        # list/watch on customresourcedefinitions): the chart installs the CRD before us.
        settings.scanning.disabled = True
        settings.watching.server_timeout = 300
        settings.networking.error_backoffs = [1, 2, 5, 10, 10]
        settings.networking.request_timeout = request_timeout
        settings.networking.connect_timeout = request_timeout
        settings.watching.connect_timeout = request_timeout
