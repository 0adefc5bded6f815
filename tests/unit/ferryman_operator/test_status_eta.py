"""A running run's ETA in its status (``status.eta``, the Progressing condition and the message),
and gone once the run stops running; the status validates against the models (so the CRD)."""

from __future__ import annotations

import datetime
from typing import Any

from runprogress import run_progress

from ferryman_operator.reconcile import status
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_operator.reconcile.status import Observation
from ferryman_worker.contract import MigrationRunStatus, PhaseEta, RunEta, RunProgress, RunState

T0 = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
WORKERS = Wanted("WorkersReady", "True", "PoolSpecApplied", "fits")
LINE = "ETA 0:12 for the run (bound by the source's rate limit: 1,800 tokens at 150/s)"
PHASE = "phase 4/4 (messages): ETA 0:12 (bound by the source's rate limit: 1,800 tokens at 150/s)"
ETA = RunEta(
    seconds=12,
    at_least_seconds=12,
    bound_by="RateLimit",
    remaining="0:12",
    message=LINE,
    phases=[
        PhaseEta(
            phase="messages", seconds=12, at_least_seconds=12, bound_by="RateLimit", message=PHASE
        )
    ],
)


def progress(**changes: Any) -> RunProgress:
    return run_progress(**{"phase": "messages", "phase_index": 3, "phases": 4, **changes})


def progressing(found: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in found["conditions"] if c["type"] == "Progressing")


def test_a_running_run_shows_its_eta_the_bound_and_the_line() -> None:
    found = status.compute({}, Observation(WORKERS, progress=progress(), eta=ETA), 1, T0)
    assert found["eta"] == {
        "seconds": 12,
        "atLeastSeconds": 12,
        "boundBy": "RateLimit",
        "remaining": "0:12",
        "message": LINE,
        "phases": [
            {
                "phase": "messages",
                "seconds": 12,
                "atLeastSeconds": 12,
                "boundBy": "RateLimit",
                "message": PHASE,
            }
        ],
    }
    assert progressing(found)["message"].endswith(f"900 rows written; {LINE}")
    assert found["message"] == progressing(found)["message"]
    assert MigrationRunStatus.model_validate(found).eta == ETA


def test_an_eta_not_known_yet_has_no_seconds_but_its_lower_bound() -> None:
    unknown = RunEta(at_least_seconds=40, remaining=">= 0:40", message="ETA at least 0:40 …")
    found = status.compute({}, Observation(WORKERS, progress=progress(), eta=unknown), 1, T0)
    assert found["eta"]["seconds"] is None and found["eta"]["atLeastSeconds"] == 40


def test_the_eta_is_removed_when_the_run_stops_running() -> None:
    running = status.compute({}, Observation(WORKERS, progress=progress(), eta=ETA), 1, T0)
    ended = progress(state=RunState.SUCCEEDED, finished_at=T0)
    for seen in (
        Observation(WORKERS, progress=ended, eta=ETA),
        Observation(WORKERS, progress=progress(suspended=True), eta=ETA),
    ):
        found = status.compute(running, seen, 1, T0)
        assert "eta" in found and found["eta"] is None  # null: the merge patch removes it
        assert "ETA" not in progressing(found)["message"]
