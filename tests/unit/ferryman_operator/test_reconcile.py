"""The operator's decisions, without a cluster: conditions, status, events, admission order,
suspend/retry/TTL, and the pool spec's sizing."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
from typing import Any

import pytest
from runprogress import run_progress

from ferryman_operator.errors import PoolSpecError
from ferryman_operator.reconcile import admission, conditions, events, lifecycle, pool, status
from ferryman_operator.reconcile.admission import Candidate
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_operator.reconcile.status import Observation, Refusal
from ferryman_worker import runspec
from ferryman_worker.contract import ConnectionBudget, Retrying, RunProgress, RunState

T0 = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
T1 = T0 + datetime.timedelta(seconds=30)
WORKERS = Wanted("WorkersReady", "True", "PoolSpecApplied", "fits")
PHASES = ("organizations", "people", "deals+messages")


def progress(**changes: Any) -> RunProgress:
    return run_progress(**{"rows_failed": 3, "phase_names": PHASES, **changes})


def by_type(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in found["conditions"]}


# -- conditions -----------------------------------------------------------------------------


def test_last_transition_time_moves_only_when_the_status_changes() -> None:
    first = conditions.merge([], [Wanted("Progressing", "True", "Running", "a")], T0, 1)
    same = conditions.merge(first, [Wanted("Progressing", "True", "Retrying", "b")], T1, 2)
    assert same[0]["lastTransitionTime"] == "2026-12-01T12:00:00Z"
    assert same[0]["reason"] == "Retrying" and same[0]["observedGeneration"] == 2
    moved = conditions.merge(same, [Wanted("Progressing", "False", "Suspended")], T1, 2)
    assert moved[0]["lastTransitionTime"] == "2026-12-01T12:00:30Z"


def test_a_condition_another_writer_set_is_kept() -> None:
    theirs = {
        "type": "Audited",
        "status": "True",
        "reason": "Checked",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    merged = conditions.merge([theirs], [Wanted("Admitted", "True", "Admitted")], T0, 1)
    assert [c["type"] for c in merged] == ["Admitted", "Audited"] and merged[1] == theirs


# -- status -----------------------------------------------------------------------------------


def test_a_running_run_shows_its_aggregate_and_conditions() -> None:
    found = status.compute({}, Observation(WORKERS, progress=progress()), 1, T0)
    assert found["state"] == "Running" and found["phase"] == "organizations"
    assert found["tasksSummary"] == "2/8" and found["rowsWritten"] == 900
    assert found["startedAt"] == "2026-12-01T12:00:00Z" and found["finishedAt"] is None
    kinds = by_type(found)
    assert kinds["Admitted"]["status"] == "True" and kinds["Progressing"]["reason"] == "Running"
    assert kinds["Complete"]["status"] == "Unknown" and kinds["Failed"]["status"] == "False"
    assert kinds["Complete"]["reason"] == "NotFinished"
    assert kinds["WorkersReady"]["reason"] == "PoolSpecApplied"
    assert found["message"].startswith("phase organizations (1 of 3): 2/8 tasks done")
    assert found["reason"] == "Running"


def test_the_status_counts_matched_rows_apart_from_written_and_keeps_them_in_an_outage() -> None:
    seen = progress(rows_written=700, rows_matched=200, rows_skipped=5)
    found = status.compute({}, Observation(WORKERS, progress=seen), 1, T0)
    assert (found["rowsWritten"], found["rowsMatched"], found["rowsSkipped"]) == (700, 200, 5)
    kept = status.compute(found, Observation(WORKERS, database_error="connection refused"), 1, T1)
    assert kept["rowsMatched"] == 200
    assert runspec.MigrationRunStatus.model_validate(found).rows_matched == 200


def test_a_queued_run_names_the_live_run_in_its_condition_and_message() -> None:
    waiting = admission.busy_message("acme", "ns/first")
    found = status.compute({}, Observation(WORKERS, waiting=waiting), 1, T0)
    assert found["state"] == "Queued"
    admitted = by_type(found)["Admitted"]
    assert (admitted["status"], admitted["reason"]) == ("False", "WorkspaceBusy")
    assert "ns/first" in admitted["message"] and found["message"] == admitted["message"]


def test_a_failed_run_carries_its_error_and_a_retrying_one_its_line() -> None:
    failed = progress(state=RunState.FAILED, finished_at=T1, error="source said 401")
    found = status.compute({}, Observation(WORKERS, progress=failed), 1, T1)
    assert found["state"] == "Failed" and by_type(found)["Failed"]["reason"] == "RunFailed"
    assert "source said 401" in found["message"]
    line = "retrying 2 task(s); the latest (people task 9, attempt 1 of 5) failed: 503"
    seen = Observation(WORKERS, progress=progress(), retrying=Retrying(line))
    retrying = status.compute({}, seen, 1, T0)
    assert by_type(retrying)["Progressing"]["reason"] == "Retrying"
    assert retrying["message"] == line and retrying["reason"] == "Retrying"


def test_a_database_outage_keeps_the_last_counts_and_says_so() -> None:
    before = status.compute({}, Observation(WORKERS, progress=progress()), 1, T0)
    found = status.compute(before, Observation(WORKERS, database_error="connection refused"), 1, T1)
    assert found["state"] == "Running" and found["rowsWritten"] == 900
    kinds = by_type(found)
    assert (kinds["Progressing"]["status"], kinds["Progressing"]["reason"]) == (
        "Unknown",
        "DatabaseUnavailable",
    )
    assert kinds["Admitted"] == by_type(before)["Admitted"]
    assert "connection refused" in found["message"]


def test_a_refused_run_is_failed_and_not_admitted() -> None:
    refusal = Refusal("WorkspaceBusy", admission.reject_message("acme", "ns/first"))
    found = status.compute({}, Observation(WORKERS, refused=refusal), 1, T0)
    assert found["state"] == "Failed"
    kinds = by_type(found)
    assert kinds["Admitted"]["status"] == "False" and kinds["Failed"]["status"] == "True"
    assert "conflictPolicy is Reject" in found["message"]


# -- events -----------------------------------------------------------------------------------


def step(
    old: dict[str, Any], seen: Observation, at: datetime.datetime = T0
) -> tuple[dict[str, Any], list[str]]:
    """The status after ``old`` when ``seen``, and the reasons of the Events the move deserves."""
    new = status.compute(old, seen, 1, at)
    return new, [e.reason for e in events.between(old, new, seen.progress)]


def observed(**changes: Any) -> Observation:
    return Observation(WORKERS, progress=progress(**changes))


def test_events_are_said_once_on_each_transition() -> None:
    queued, said = step({}, Observation(WORKERS, waiting="busy"))
    assert said == ["Queued"]
    assert step(queued, Observation(WORKERS, waiting="busy"))[1] == []
    running, said = step(queued, observed())
    assert said == ["Admitted", "PhaseStarted"]
    suspended, said = step(running, observed(suspended=True), T1)
    assert said == ["Suspended"]
    resumed, said = step(suspended, observed(), T1)
    assert said == ["Resumed"]
    failed = status.compute(resumed, observed(state=RunState.FAILED, error="boom"), 1, T1)
    [event] = events.between(resumed, failed, progress(state=RunState.FAILED, error="boom"))
    assert (event.type, event.reason) == ("Warning", "Failed") and "boom" in event.message


def test_a_refused_run_admitted_later_is_admitted_and_a_failed_one_reopened_is_retried() -> None:
    refused, said = step({}, Observation(WORKERS, refused=Refusal("ProviderNotFound", "none")))
    assert said == ["Refused"]
    admitted, said = step(refused, observed(), T1)
    assert said == ["Admitted", "PhaseStarted"]
    assert by_type(admitted)["Admitted"]["status"] == "True"
    failed, said = step(admitted, observed(state=RunState.FAILED, error="boom"), T1)
    assert said == ["Failed"]
    assert step(failed, observed(), T1)[1] == ["Retried", "PhaseStarted"]


def started(old: dict[str, Any], seen: Observation) -> list[str]:
    """The messages of the PhaseStarted Events of the move from ``old`` when ``seen``."""
    new = status.compute(old, seen, 1, T1)
    return [
        e.message for e in events.between(old, new, seen.progress) if e.reason == "PhaseStarted"
    ]


def test_every_phase_opened_since_the_last_look_gets_its_event_in_order() -> None:
    every = [f"phase {name} started" for name in PHASES]
    pending = status.compute({}, Observation(WORKERS), 1, T0)
    assert started(pending, observed(phase="deals+messages", phase_index=2)) == every
    in_first = status.compute({}, observed(), 1, T0)
    assert started(in_first, observed()) == []
    assert started(in_first, observed(phase="deals+messages", phase_index=2)) == every[1:]
    in_second = status.compute({}, observed(phase="people", phase_index=1), 1, T0)
    done = observed(state=RunState.SUCCEEDED, phase=None, phase_index=3, finished_at=T1)
    assert started(in_second, done) == every[2:]  # the last phase ended between two looks
    assert started(pending, done) == every  # a whole run between two looks
    assert started(status.compute(in_second, done, 1, T1), done) == []


def test_a_retried_run_reopens_its_phase_once_and_an_outage_skips_none() -> None:
    failed = status.compute({}, observed(state=RunState.FAILED, phase=None, phase_index=1), 1, T0)
    assert started(failed, observed(phase="people", phase_index=1)) == ["phase people started"]
    in_first = status.compute({}, observed(), 1, T0)
    outage = status.compute(in_first, Observation(WORKERS, database_error="refused"), 1, T1)
    assert started(in_first, Observation(WORKERS, database_error="refused")) == []
    assert started(outage, observed(phase="deals+messages", phase_index=2)) == [
        "phase people started",
        "phase deals+messages started",
    ]


# -- admission order, lifecycle ----------------------------------------------------------------


def test_the_oldest_waiting_run_of_a_workspace_goes_first() -> None:
    old = Candidate("2026-12-01T10:00:00Z", "a/old", "acme", "Queued")
    new = Candidate("2026-12-01T11:00:00Z", "b/new", "acme", "Pending")
    other = Candidate("2026-12-01T09:00:00Z", "c/other", "globex", "Queued")
    done = Candidate("2026-12-01T08:00:00Z", "c/done", "acme", "Succeeded")
    assert admission.ahead_of(new, [old, new, other, done]) == old
    assert admission.ahead_of(old, [old, new, other, done]) is None
    deleting = dataclasses.replace(old, deleting=True)
    assert admission.ahead_of(new, [deleting, new]) is None


def test_suspend_resume_retry_and_ttl() -> None:
    assert lifecycle.suspension(True, running=True, suspended=False) == "suspend"
    assert lifecycle.suspension(False, running=True, suspended=True) == "resume"
    assert lifecycle.suspension(True, running=False, suspended=False) is None
    assert lifecycle.suspension(True, running=True, suspended=True) is None
    assert lifecycle.retry_requested("1", None) and not lifecycle.retry_requested("1", "1")
    assert not lifecycle.retry_requested(None, None)
    assert lifecycle.ttl_left(60, T0, T1) == 30 and lifecycle.ttl_left(None, T0, T1) is None


def test_a_finished_run_with_a_ttl_expires_that_long_after_it_finished() -> None:
    def body(state: str, ttl: int | None = 60) -> dict[str, Any]:
        spec = {} if ttl is None else {"ttlSecondsAfterFinished": ttl}
        return {"spec": spec, "status": {"state": state, "finishedAt": "2026-12-01T12:00:00Z"}}

    assert lifecycle.expires_in(body("Succeeded"), T1) == 30
    assert lifecycle.expires_in(body("Cancelled", ttl=0), T1) == -30  # due: deleted now
    assert lifecycle.expires_in(body("Running"), T1) is None
    assert lifecycle.expires_in(body("Failed", ttl=None), T1) is None


def test_a_run_object_is_known_by_its_creation_key_workspace_and_state() -> None:
    body = {
        "metadata": {
            "namespace": "ns",
            "name": "acme-crm",
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "deletionTimestamp": "2026-12-01T12:00:00Z",
        },
        "spec": {"workspace": "acme"},
        "status": {"state": "Queued"},
    }
    found = admission.candidate(body)
    assert found == Candidate("2026-12-01T10:00:00Z", "ns/acme-crm", "acme", "Queued", True)
    assert not found.waiting  # being deleted


# -- pool spec --------------------------------------------------------------------------------

BUDGET = ConnectionBudget(max_connections=40, superuser_reserved=3, reserved=0)


def test_a_pool_spec_that_fits_derives_the_pool_size_from_the_worker_rule() -> None:
    spec = pool.parse({"lanes": " migrations:4,default:2 ", "replicas": "2"})
    sizing = pool.size(spec, BUDGET)
    assert sizing.fits and sizing.pool_size == 4 + 2 + 4 and sizing.migrations_width == 4
    assert sizing.condition.status == "True"
    assert "2 replicas x 10 connections + 6" in sizing.message


def test_an_over_budget_pool_spec_says_why_in_numbers() -> None:
    spec = pool.parse({"lanes": "migrations:8", "replicas": "3", "operatorConnections": "1"})
    sizing = pool.size(spec, BUDGET)
    assert not sizing.fits and sizing.reason == "OverConnectionBudget"
    assert sizing.message.startswith(
        "3 replicas x 12 connections + 5 (operator 1, reaper 2, headroom 2) = 41 exceed the 37 "
        "that max_connections 40 - 3 reserved leaves"
    )
    assert pool.deployment_patch({}, sizing) is None


def test_a_pool_size_below_the_worker_rule_is_refused_with_the_workers_words() -> None:
    sizing = pool.size(
        pool.parse({"lanes": "migrations:4", "replicas": "1", "poolSize": "5"}), BUDGET
    )
    assert not sizing.fits and sizing.reason == "InvalidPoolSpec"
    assert "FERRYMAN_POOL_SIZE" in sizing.message and "at least 8" in sizing.message


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"replicas": "1"}, "lanes is missing"),
        ({"lanes": "migrations:2"}, "replicas is missing"),
        ({"lanes": "migrations:2", "replicas": "two"}, "replicas is 'two', not a whole number"),
        ({"lanes": "migrations:2", "replicas": "1", "headroomConnections": "-1"}, "at least 0"),
    ],
)
def test_a_malformed_pool_spec_names_the_key(data: dict[str, str], fragment: str) -> None:
    with pytest.raises(PoolSpecError, match=fragment):
        pool.parse(data)


def sized_deployment(lanes: str, pool_size: int, replicas: int) -> dict[str, Any]:
    """A worker Deployment (or the patch that makes one) as the pool spec sizes it."""
    digest = hashlib.sha256(f"lanes={lanes};poolSize={pool_size}".encode()).hexdigest()[:16]
    env = [
        {"name": "FERRYMAN_LANES", "value": lanes},
        {"name": "FERRYMAN_POOL_SIZE", "value": str(pool_size)},
    ]
    return {
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"annotations": {"ferryman.dev/pool-spec-hash": digest}},
                "spec": {"containers": [{"name": "worker", "env": env}]},
            },
        }
    }


def test_the_deployment_patch_is_written_once_then_nothing() -> None:
    sizing = pool.size(pool.parse({"lanes": "migrations:2", "replicas": "2"}), BUDGET)
    deployment: dict[str, Any] = {
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "worker"}]}}}
    }
    patch = pool.deployment_patch(deployment, sizing)
    assert patch == sized_deployment("migrations:2", 6, 2)
    assert pool.deployment_patch(sized_deployment("migrations:2", 6, 2), sizing) is None


def test_a_lane_without_a_width_takes_its_threads_from_the_pool_size() -> None:
    spec = pool.parse({"lanes": "migrations,critical:2,default", "replicas": "2", "poolSize": "15"})
    sizing = pool.size(spec, BUDGET)
    # 15 - 4 own - 2 for critical = 9 for two lanes: 5 (the first gets the remainder) and 4
    assert sizing.fits and sizing.pool_size == 15 and sizing.migrations_width == 5
    assert "2 replicas x 15 connections + 6" in sizing.message
    patch = pool.deployment_patch({}, sizing)  # the lanes as given: the chart hashes the same
    assert patch == sized_deployment("migrations,critical:2,default", 15, 2)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"lanes": "migrations,default:2"}, "no thread count"),
        ({"lanes": "migrations,default:2", "poolSize": "6"}, "leaves 0 thread(s)"),
    ],
)
def test_a_width_less_lane_without_room_is_refused_with_the_workers_words(
    data: dict[str, str], fragment: str
) -> None:
    sizing = pool.size(pool.parse({**data, "replicas": "1"}), BUDGET)
    assert not sizing.fits and sizing.reason == "InvalidPoolSpec"
    assert fragment in sizing.message and "FERRYMAN_POOL_SIZE" in sizing.message
    assert pool.deployment_patch({}, sizing) is None
