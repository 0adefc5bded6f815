"""The Complete condition's rules and ``status.verdicts``, from a run's kinds' verdicts."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from runprogress import run_progress

from ferryman_operator.reconcile import complete, events, status
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_operator.reconcile.status import Observation, Refusal
from ferryman_worker.contract import (
    KindCheck,
    KindVerdict,
    Retrying,
    RunProgress,
    RunState,
    Verification,
)
from ferryman_worker.engine import verification

T1 = datetime.datetime(2026, 12, 1, 12, 5, tzinfo=datetime.UTC)
WORKERS = Wanted("WorkersReady", "True", "PoolSpecApplied", "fits")
RECONCILED = KindVerdict(
    "organizations", "reconciled", 121, 121, "listed 121, the source states 121"
)
VERIFIED = KindVerdict("people", "verified", 40, 40, "every id of the source is in the ledger")
UNVERIFIED = KindVerdict("deals", "unverified", 30, None, "the source states no total")
SHORT = KindVerdict("people", "short", 30, 121, "people: listed 30 of the 121 ...")
REFUSED = KindVerdict("deals", "refused", None, None, "deals: all 30 of its records were refused")


def ended(state: RunState, *verdicts: KindVerdict, **changes: Any) -> RunProgress:
    return run_progress(state=state, finished_at=T1, verdicts=verdicts, **changes)


def said(found: Wanted) -> tuple[str, str]:
    return found.status, found.reason


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ((RECONCILED,), ("True", "Reconciled")),
        ((RECONCILED, VERIFIED), ("True", "Reconciled")),
        ((VERIFIED,), ("True", "Verified")),
        ((RECONCILED, UNVERIFIED), ("Unknown", "Unverified")),
        ((), ("Unknown", "Unverified")),
    ],
)
def test_a_succeeded_run_is_complete_only_when_every_kind_adds_up(
    verdicts: tuple[KindVerdict, ...], expected: tuple[str, str]
) -> None:
    assert said(complete.condition(ended(RunState.SUCCEEDED, *verdicts))) == expected


def test_an_unverified_kind_is_named_with_what_its_verdict_rests_on() -> None:
    found = complete.condition(ended(RunState.SUCCEEDED, RECONCILED, UNVERIFIED))
    assert "deals: the source states no total" in found.message
    assert "organizations" not in found.message


def test_a_short_or_refused_kind_makes_it_false_whatever_the_state() -> None:
    short = complete.condition(ended(RunState.FAILED, RECONCILED, SHORT, error="not every ..."))
    assert said(short) == ("False", "Short") and "listed 30 of the 121" in short.message
    refused = complete.condition(ended(RunState.FAILED, REFUSED))
    assert said(refused) == ("False", "Refused")
    both = complete.condition(ended(RunState.FAILED, SHORT, REFUSED))
    assert said(both) == ("False", "Short") and "deals refused" in both.message
    running = complete.condition(run_progress(verdicts=(SHORT,)))
    assert said(running) == ("False", "Short")


def test_a_running_run_is_not_known_complete_and_an_ended_one_without_a_failing_kind_is_not() -> (
    None
):
    running = complete.condition(run_progress(verdicts=(RECONCILED,)))
    assert said(running) == ("Unknown", "NotFinished")
    assert "organizations reconciled" in running.message
    failed = ended(RunState.FAILED, RECONCILED, error="task 4 failed: SourceRefused: HTTP 401")
    assert said(complete.condition(failed)) == ("False", "Failed")
    assert said(complete.condition(ended(RunState.CANCELLED, RECONCILED))) == (
        "False",
        "Cancelled",
    )
    assert said(complete.condition(None)) == ("Unknown", "NotFinished")
    assert said(complete.condition(None, refused=True)) == ("False", "NotAdmitted")


def test_the_status_carries_each_kind_verdict_with_its_shortfall() -> None:
    run = ended(RunState.FAILED, RECONCILED, SHORT, error="not every record was imported")
    found = status.compute({}, Observation(WORKERS, progress=run), 1, T1)
    assert found["verdicts"] == [
        {
            "kind": "organizations",
            "verdict": "reconciled",
            "listed": 121,
            "total": 121,
            "note": RECONCILED.note,
        },
        {
            "kind": "people",
            "verdict": "short",
            "listed": 30,
            "total": 121,
            "shortBy": 91,
            "note": SHORT.note,
        },
    ]
    kinds = {c["type"]: c for c in found["conditions"]}
    assert (kinds["Complete"]["status"], kinds["Complete"]["reason"]) == ("False", "Short")


def test_a_refused_run_is_not_complete() -> None:
    found = status.compute({}, Observation(WORKERS, refused=Refusal("KindsInvalid", "no")), 1, T1)
    kinds = {c["type"]: c for c in found["conditions"]}
    assert kinds["Complete"]["reason"] == "NotAdmitted" and found["reason"] == "KindsInvalid"


def test_a_run_that_succeeds_unproven_gets_an_unverified_event_and_a_proven_one_none() -> None:
    before = status.compute({}, Observation(WORKERS, progress=run_progress()), 1, T1)
    for verdicts, expected in (((RECONCILED, UNVERIFIED), True), ((RECONCILED,), False)):
        run = ended(RunState.SUCCEEDED, *verdicts)
        after = status.compute(before, Observation(WORKERS, progress=run), 1, T1)
        said = [e.reason for e in events.between(before, after, run)]
        assert ("Unverified" in said) is expected and "Succeeded" in said


def test_a_task_failing_for_a_cause_it_names_stops_progressing_and_says_why() -> None:
    line = "CredentialUnavailable (the source credential ...): retrying 1 task(s); ..."
    before = status.compute({}, Observation(WORKERS, progress=run_progress()), 1, T1)
    seen = Observation(
        WORKERS, progress=run_progress(), retrying=Retrying(line, "CredentialUnavailable")
    )
    after = status.compute(before, seen, 1, T1)
    kinds = {c["type"]: c for c in after["conditions"]}
    assert (kinds["Progressing"]["status"], kinds["Progressing"]["reason"]) == (
        "False",
        "CredentialUnavailable",
    )
    assert (after["reason"], after["message"]) == ("CredentialUnavailable", line)
    warned = events.between(before, after, seen.progress)
    assert [(e.type, e.reason) for e in warned] == [("Warning", "CredentialUnavailable")]
    again = status.compute(after, seen, 1, T1)
    assert events.between(after, again, seen.progress) == []  # said once


def test_a_run_that_failed_for_a_named_cause_carries_it_as_its_failed_reason() -> None:
    run = ended(RunState.FAILED, error="task 4 failed: SourceRefused: listing: HTTP 401")
    found = status.compute({}, Observation(WORKERS, progress=run), 1, T1)
    failed = {c["type"]: c for c in found["conditions"]}["Failed"]
    assert failed["reason"] == "SourceRefused" and found["reason"] == "SourceRefused"


def verified(*checks: KindCheck, state: str = "done", request: str = "again") -> Verification:
    return Verification(request, state, None, T1, T1, checks)  # type: ignore[arg-type]


def check(
    kind: str, listed: int, missing: tuple[str, ...] = (), gone: tuple[str, ...] = ()
) -> KindCheck:
    return KindCheck(kind, listed, len(missing), len(gone), missing, gone, "")


def test_a_finished_verification_proves_a_kind_or_makes_it_short_by_its_missing_ids() -> None:
    found = verified(
        check("organizations", 121),
        check("deals", 31, missing=("7", "9"), gone=("12",)),
    )
    judged = verification.judged((RECONCILED, UNVERIFIED), found)
    assert [(v.verdict, v.shortfall) for v in judged] == [("verified", None), ("short", 2)]
    assert "2 id(s) the source lists that the ledger lacks: 7, 9" in judged[1].note
    assert "gone from the source since: 12" in judged[1].note
    run = ended(RunState.SUCCEEDED, *judged)
    assert said(complete.condition(run)) == ("False", "Short")
    assert complete.verdicts(run)[1]["shortBy"] == 2
    proven = ended(RunState.SUCCEEDED, *verification.judged((UNVERIFIED,), verified(
        check("deals", 30, gone=("12",))  # gone since: the import still holds all it lists
    )))  # fmt: skip
    assert said(complete.condition(proven)) == ("True", "Verified")


def test_a_verification_not_done_or_a_kind_it_did_not_compare_changes_no_verdict() -> None:
    for state in ("queued", "running", "failed"):
        found = verified(check("deals", 30, missing=("1",)), state=state)
        assert verification.judged((UNVERIFIED,), found) == (UNVERIFIED,)
    assert verification.judged((UNVERIFIED,), None) == (UNVERIFIED,)
    assert verification.judged((UNVERIFIED,), verified(check("people", 3))) == (UNVERIFIED,)
    refused = verification.judged((REFUSED,), verified(check("deals", 30, missing=("1",))))
    assert refused[0].verdict == "refused" and "ledger lacks: 1" in refused[0].note


def test_a_verification_result_is_an_event_once_per_request() -> None:
    def with_verification(found: Verification | None) -> dict[str, Any]:
        run = ended(RunState.SUCCEEDED, UNVERIFIED, verification=found)
        return status.compute({}, Observation(WORKERS, progress=run), 1, T1)

    pending = with_verification(verified(state="queued", request="on-success"))
    done = with_verification(verified(check("deals", 30), request="on-success"))
    differs = with_verification(verified(check("deals", 30, missing=("4",))))
    said = [(e.type, e.reason) for e in events.between(pending, done)]
    assert said == [("Normal", "Verified")]
    assert events.between(done, done) == []
    assert [(e.type, e.reason) for e in events.between(done, differs)] == [
        ("Warning", "VerificationDiffers")
    ]
