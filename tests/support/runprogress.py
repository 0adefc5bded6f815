"""A run's aggregate (``contract.RunProgress``) for unit tests: a running run, changed at will."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from ferryman_worker.contract import RunProgress, RunState

T0 = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


def run_progress(**changes: Any) -> RunProgress:
    """A running run in its first of three phases, 2 of 8 tasks done, 900 rows; ``changes``
    replace any field."""
    base = RunProgress(
        id=7,
        name="ns/acme-crm",
        workspace="acme",
        state=RunState.RUNNING,
        suspended=False,
        phase="organizations",
        phase_index=0,
        phases=3,
        tasks_done=2,
        tasks_total=8,
        tasks_running=4,
        tasks_failed=0,
        rows_written=900,
        rows_skipped=0,
        rows_failed=0,
        started_at=T0,
        finished_at=None,
        error=None,
    )
    return dataclasses.replace(base, **changes)
