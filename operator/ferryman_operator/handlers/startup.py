"""kopf's own settings: our finalizer, progress kept in annotations (``status`` holds only
declared fields), no Events for kopf's routine log lines, no peering (the Lease decides)."""

from __future__ import annotations

import logging
from typing import Any

import kopf

FINALIZER = "ferryman.dev/cancel-run"
PREFIX = "kopf.ferryman.dev"


def register(registry: kopf.OperatorRegistry) -> None:
    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.persistence.finalizer = FINALIZER
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=PREFIX, key="last-handled-configuration"
        )
        settings.posting.level = logging.WARNING
        settings.peering.standalone = True
        settings.watching.server_timeout = 300
        settings.networking.error_backoffs = [1, 2, 5, 10, 10]
