"""The refresh of every live run, without a cluster: which runs it decides from the one read of
them all, and which need a visit of their own (a statement each)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from runprogress import run_progress
from tests.unit.test_runspec import VALID

from ferryman_operator.reconcile import admission, lifecycle, refresh, visit
from ferryman_operator.reconcile.admission import Candidate
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_operator.reconcile.status import Observation, Refusal
from ferryman_worker import contract
from ferryman_worker.contract import LiveRun, Retrying, RunState

WORKERS = Wanted("WorkersReady", "True", "PoolSpecApplied", "fits")
OLDER = Candidate("2026-12-01T11:00:00Z", "ns/older", "acme", "Queued")


def run(**spec: Any) -> contract.MigrationRun:
    body = copy.deepcopy(VALID)
    body["metadata"]["namespace"] = "ns"
    body["spec"].update(spec)
    return contract.parse_run(body, source="ns/acme-crm")


def settled(
    found: LiveRun | None,
    *,
    spec: dict[str, Any] | None = None,
    old: dict[str, Any] | None = None,
    annotation: str | None = None,
    ahead: Candidate | None = None,
    busy: dict[str, str] | None = None,
) -> Observation | None:
    asked = visit.Asked(run(**(spec or {})), old or {}, WORKERS, retry=annotation, ahead=ahead)
    return refresh.settled(found, asked, busy or {})


def test_a_running_run_is_observed_from_the_read_of_them_all() -> None:
    found = LiveRun(run_progress(), retrying=Retrying("retrying 1 task"), eta=None)
    assert settled(found) == Observation(WORKERS, progress=found.progress, retrying=found.retrying)


def test_a_finished_or_suspended_run_as_its_spec_wants_is_observed_too() -> None:
    done = LiveRun(run_progress(state=RunState.SUCCEEDED))
    paused = LiveRun(run_progress(suspended=True))
    assert settled(done) == Observation(WORKERS, progress=done.progress)
    assert settled(paused, spec={"suspend": True}) == Observation(WORKERS, progress=paused.progress)


def test_a_run_to_suspend_resume_retry_or_restart_needs_its_own_visit() -> None:
    assert settled(LiveRun(run_progress()), spec={"suspend": True}) is None
    assert settled(LiveRun(run_progress(suspended=True))) is None
    failed = LiveRun(run_progress(state=RunState.FAILED))
    assert settled(failed, annotation="1", old={"lastRetry": None}) is None
    assert settled(failed, annotation="1", old={"lastRetry": "1"}) is not None  # taken already
    assert settled(LiveRun(run_progress(tasks_total=0))) is None  # its start was cut short


def test_a_run_not_admitted_waits_behind_an_older_one_or_a_live_one_without_a_statement() -> None:
    behind = settled(None, ahead=OLDER)
    assert behind == Observation(WORKERS, waiting=admission.behind_message("acme", "ns/older"))
    busy = settled(None, busy={"acme": "ns/live"})
    assert busy == Observation(WORKERS, waiting=admission.busy_message("acme", "ns/live"))
    rejected = settled(None, spec={"conflictPolicy": "Reject"}, busy={"acme": "ns/live"})
    assert rejected == Observation(
        WORKERS, refused=Refusal("WorkspaceBusy", admission.reject_message("acme", "ns/live"))
    )


def test_a_run_first_in_line_of_a_free_workspace_needs_its_own_visit_to_be_admitted() -> None:
    assert settled(None) is None
    assert settled(None, busy={"other": "ns/live"}) is None
    assert settled(None, ahead=OLDER, annotation="1") is None  # a retry is tried by its visit


def test_a_refused_run_stays_refused_until_retried() -> None:
    old = {
        "state": "Failed",
        "conditions": [
            {"type": "Admitted", "status": "False", "reason": "InvalidSpec", "message": "bad"}
        ],
    }
    assert settled(None, old=old) == Observation(WORKERS, refused=Refusal("InvalidSpec", "bad"))
    assert settled(None, old=old, annotation="2") is None


def _verified(request: str, state: str = "done") -> contract.Verification:
    kind = contract.KindCheck("deals", 10, 1, 0, ("7",), (), "")
    return contract.Verification(request, state, None, None, None, (kind,))  # type: ignore[arg-type]


def test_a_verify_annotation_needs_a_visit_once_the_run_finished_and_until_it_is_answered() -> None:
    def verify(progress: contract.RunProgress, value: str) -> Observation | None:
        found = LiveRun(progress)
        return refresh.settled(found, visit.Asked(run(), {}, WORKERS, verify=value), {})

    running = run_progress()
    done = run_progress(state=RunState.SUCCEEDED, finished_at=running.started_at)
    assert verify(running, "1") is not None  # a live run: verified once it has finished
    assert verify(done, "1") is None  # finished, not asked for yet: its own visit asks
    answered = dataclasses.replace(done, verification=_verified("1"))
    assert verify(answered, "1") == Observation(WORKERS, progress=answered)
    assert verify(answered, "2") is None  # a new value: asked for again


def test_a_finished_run_stays_refreshed_while_its_verification_is_pending() -> None:
    assert not lifecycle.verify_pending(None, None)
    assert lifecycle.verify_pending("1", None)  # asked for, not answered yet
    assert lifecycle.verify_pending("1", {"request": "1", "verdict": "Pending"})
    assert not lifecycle.verify_pending("1", {"request": "1", "verdict": "Differs"})
    assert lifecycle.verify_pending("2", {"request": "1", "verdict": "Verified"})


def test_the_status_carries_the_verification_as_its_model_says() -> None:
    found = contract.verification_status(_verified("1"))
    assert (found.request, found.verdict) == ("1", "Differs")
    assert found.message == "differs: 1 kind(s), 1 missing, 0 gone"
    assert found.kinds[0].missing_ids == ["7"]
    pending = contract.verification_status(_verified("2", "running"))
    assert pending.verdict == "Pending" and pending.message == "pending: running (asked for by 2)"
