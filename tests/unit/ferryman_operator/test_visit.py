"""One reconcile's decisions, without a cluster or a database: whether a run the database does
not know is admitted or held back, which statements a visit makes to an admitted run, what the
visit's facts say of it (its observation, the retry it answered, the Events of a retry not
done), which status a reconcile starts from and what it writes."""

from __future__ import annotations

import copy
import dataclasses
import datetime
from typing import Any

from runprogress import run_progress
from tests.unit.test_runspec import VALID

from ferryman_operator.reconcile import admission, visit
from ferryman_operator.reconcile.admission import Candidate
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_operator.reconcile.definitions import Resolved
from ferryman_operator.reconcile.events import Event
from ferryman_operator.reconcile.status import Observation, Refusal
from ferryman_worker import contract
from ferryman_worker.contract import Retrying, RunState

T0 = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
WORKERS = Wanted("WorkersReady", "True", "PoolSpecApplied", "fits")
OLDER = Candidate("2026-12-01T11:00:00Z", "ns/older", "acme", "Queued")
REFUSED = {
    "state": "Failed",
    "conditions": [
        {"type": "Admitted", "status": "False", "reason": "ProviderNotFound", "message": "gone"}
    ],
}
NO_SECRET = Refusal("CredentialMissing", "there is no Secret democrm-token")
FAILED = run_progress(state=RunState.FAILED, error="HTTP 401")


def run(**spec: Any) -> contract.MigrationRun:
    body = copy.deepcopy(VALID)
    body["metadata"]["namespace"] = "ns"
    body["spec"].update(spec)
    return contract.parse_run(body, source="ns/acme-crm")


def asked(
    old: dict[str, Any] | None = None, spec: dict[str, Any] | None = None, **more: Any
) -> visit.Asked:
    """What a reconcile of the run asks: a run of VALID (changed by ``spec``) whose status was
    ``old``."""
    return visit.Asked(run(**(spec or {})), old or {}, WORKERS, **more)


# -- before the visit -----------------------------------------------------------------------


def test_a_reconcile_reads_the_annotations_of_the_run() -> None:
    body = copy.deepcopy(VALID)
    body["metadata"]["annotations"] = {"ferryman.dev/retry": "2", "ferryman.dev/verify": "v1"}
    found = visit.asked(body, run(), {}, WORKERS, OLDER, readmit=True)
    assert (found.retry, found.verify, found.ahead, found.readmit) == ("2", "v1", OLDER, True)


def test_a_reconcile_starts_from_the_status_it_wrote_last_unless_the_body_is_older() -> None:
    body = {"metadata": {"uid": "u1", "generation": 2}, "status": {"state": "Queued"}}
    assert visit.before(body, None) == {"state": "Queued"}
    written = {"state": "Running", "observedGeneration": 2, "_uid": "u1"}
    assert visit.before(body, written) == {"state": "Running", "observedGeneration": 2}
    assert visit.before(body, {**written, "observedGeneration": 3}) is None  # an older body
    other = {**written, "_uid": "u0", "observedGeneration": 3}  # the name's previous object
    assert visit.before(body, other) == {"state": "Queued"}


def test_a_visit_may_admit_a_waiting_run_a_retried_one_or_a_refused_one_examined_again() -> None:
    assert all(asked({"state": state}).may_admit for state in (None, "Pending", "Queued"))
    assert not asked({"state": "Running"}).may_admit
    assert asked({"state": "Failed"}, retry="1").may_admit
    assert not asked({"state": "Failed", "lastRetry": "1"}, retry="1").may_admit  # answered
    assert asked(REFUSED, readmit=True).may_admit
    assert not asked({"state": "Failed"}, readmit=True).may_admit  # failed, not refused


# -- a run the database does not know --------------------------------------------------------


def test_a_run_first_in_line_with_its_credential_and_definitions_is_admitted() -> None:
    assert visit.held(asked()) is None
    assert visit.held(asked(sealed=None, resolved=Resolved(provider={"kinds": {}}))) is None


def test_a_run_is_held_back_by_a_refused_credential_or_definition_or_an_older_run() -> None:
    gone = Refusal("ProviderNotFound", "no provider")
    assert visit.held(asked(sealed=NO_SECRET)) == Observation(WORKERS, refused=NO_SECRET)
    assert visit.held(asked(resolved=gone)) == Observation(WORKERS, refused=gone)
    assert visit.held(asked(sealed=NO_SECRET, resolved=gone)) == Observation(
        WORKERS, refused=NO_SECRET
    )
    assert visit.held(asked(ahead=OLDER)) == Observation(
        WORKERS, waiting=admission.behind_message("acme", "ns/older")
    )
    rejected = visit.held(asked(spec={"conflictPolicy": "Reject"}, ahead=OLDER))
    assert rejected == Observation(
        WORKERS, refused=Refusal("WorkspaceBusy", admission.reject_message("acme", "ns/older"))
    )


def test_a_refused_run_stays_refused_until_retried_or_examined_again() -> None:
    stays = Observation(WORKERS, refused=Refusal("ProviderNotFound", "gone"))
    assert visit.held(asked(REFUSED)) == stays
    assert visit.held(asked(REFUSED, retry="1")) is None
    assert visit.held(asked(REFUSED, readmit=True)) is None
    assert visit.held(asked({**REFUSED, "lastRetry": "1"}, retry="1")) == stays


def test_the_database_refusing_admission_says_why_in_the_status() -> None:
    def refused(error: contract.FerrymanError, **spec: Any) -> Observation:
        return visit.outcome(asked(spec=spec), visit.Facts(refused=error)).seen

    owned = contract.WorkspaceOwned("acme", "team-b", "ns")
    assert refused(owned) == Observation(WORKERS, refused=Refusal("WorkspaceOwned", str(owned)))
    busy = contract.AdmissionRefused("acme", "ns/live")
    assert refused(busy) == Observation(WORKERS, waiting=admission.busy_message("acme", "ns/live"))
    assert refused(busy, conflictPolicy="Reject").refused == Refusal(
        "WorkspaceBusy", admission.reject_message("acme", "ns/live")
    )
    catalog = refused(contract.MappingInvalid("table crm_people: no such table"))
    assert catalog.refused is not None and catalog.refused.reason == "MappingInvalid"
    assert "table crm_people: no such table" in catalog.refused.message
    failed = refused(contract.ConfigurationError("run `ferryman db migrate`"))
    assert failed.refused == Refusal("AdmissionFailed", "run `ferryman db migrate`")


def test_a_run_held_back_shows_why_and_answers_its_retry() -> None:
    held = visit.outcome(asked(ahead=OLDER, retry="3"), visit.Facts())
    assert held == visit.Outcome(
        Observation(WORKERS, waiting=admission.behind_message("acme", "ns/older")), retried="3"
    )


# -- an admitted run ------------------------------------------------------------------------


def test_a_run_running_without_a_task_had_its_start_cut_short() -> None:
    assert visit.cut_short(run_progress(tasks_total=0))
    assert not visit.cut_short(run_progress())
    assert not visit.cut_short(run_progress(state=RunState.FAILED, tasks_total=0))


def test_a_running_run_as_its_spec_wants_gets_no_statement() -> None:
    assert visit.plan(asked(), run_progress()) == visit.Plan()
    assert visit.plan(asked(spec={"suspend": True}), run_progress(suspended=True)) == visit.Plan()


def test_a_run_is_suspended_or_resumed_as_its_spec_says() -> None:
    suspend = visit.plan(asked(spec={"suspend": True}), run_progress())
    assert suspend == visit.Plan(suspension="suspend", reread=True)
    resume = visit.plan(asked(), run_progress(suspended=True))
    assert resume == visit.Plan(suspension="resume", reread=True)
    done = run_progress(state=RunState.SUCCEEDED)
    assert visit.plan(asked(spec={"suspend": True}), done) == visit.Plan()  # only a running run


def test_a_failed_run_is_reopened_when_retried_with_a_usable_credential() -> None:
    assert visit.plan(asked(retry="1"), FAILED) == visit.Plan(reopen=True, reread=True)
    refused = visit.plan(asked(retry="1", sealed=NO_SECRET), FAILED)
    assert refused == visit.Plan(reread=True)
    assert visit.plan(asked(retry="1"), run_progress()) == visit.Plan(reread=True)
    assert visit.plan(asked({"lastRetry": "1"}, retry="1"), FAILED) == visit.Plan()


def test_a_finished_run_is_verified_once_per_value_of_the_annotation() -> None:
    done = run_progress(state=RunState.SUCCEEDED, finished_at=T0)
    assert visit.plan(asked(verify="v1"), done) == visit.Plan(verify="v1", reread=True)
    assert visit.plan(asked(verify="v1"), run_progress()) == visit.Plan()  # once it finished
    kind = contract.KindCheck("deals", 10, 0, 0, (), (), "")
    check = contract.Verification("v1", "done", None, None, None, (kind,))  # type: ignore[arg-type]
    answered = dataclasses.replace(done, verification=check)
    assert visit.plan(asked(verify="v1"), answered) == visit.Plan()
    assert visit.plan(asked(verify="v2"), answered) == visit.Plan(verify="v2", reread=True)


def test_an_admitted_run_is_observed_from_the_facts_of_its_visit() -> None:
    retrying = Retrying("retrying 1 task(s)", "SourceRefused")
    facts = visit.Facts(progress=run_progress(), found=run_progress(), retrying=retrying)
    assert visit.outcome(asked(), facts) == visit.Outcome(
        Observation(WORKERS, progress=run_progress(), retrying=retrying)
    )


def test_a_retry_not_done_gets_a_warning_and_is_answered_all_the_same() -> None:
    def retried(found: contract.RunProgress, **more: Any) -> visit.Outcome:
        facts = visit.Facts(progress=found, found=found, **more)
        return visit.outcome(asked(retry="4"), facts)

    ignored = retried(run_progress())
    assert ignored.retried == "4" and ignored.events == (
        Event("Warning", "RetryIgnored", "only a failed run is retried; this one is Running"),
    )
    busy = "workspace 'acme' already has a live run, 'ns/live'"
    assert retried(FAILED, reopen_refused=busy).events == (Event("Warning", "RetryRefused", busy),)
    sealed = visit.outcome(
        asked(retry="4", sealed=NO_SECRET), visit.Facts(progress=FAILED, found=FAILED)
    )
    assert sealed.events == (Event("Warning", "RetryRefused", NO_SECRET.message),)


def test_a_retry_done_gets_no_warning_of_the_visit() -> None:
    reopened = visit.Facts(progress=run_progress(), found=FAILED)
    assert visit.outcome(asked(retry="5"), reopened) == visit.Outcome(
        Observation(WORKERS, progress=run_progress()), retried="5"
    )


# -- what is written ------------------------------------------------------------------------


def test_a_decision_writes_only_the_keys_that_changed_and_the_visits_events_first() -> None:
    seen = visit.Outcome(
        Observation(WORKERS, progress=run_progress()),
        retried="6",
        events=(Event("Warning", "RetryIgnored", "only a failed run is retried"),),
    )
    first = visit.decision({}, {"state": "Queued"}, seen, 1, T0)
    assert first.status["state"] == "Running" and first.status["lastRetry"] == "6"
    unset = {key for key, value in first.status.items() if value is None}  # nothing to delete
    assert first.changes.keys() == first.status.keys() - unset and first.now == T0
    assert [e.reason for e in first.events] == ["RetryIgnored", "Admitted"]
    again = visit.decision(first.status, first.status, dataclasses.replace(seen, events=()), 1, T0)
    assert again.changes == {} and again.events == []
