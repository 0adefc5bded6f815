"""The run's ``Complete`` condition and ``status.verdicts``: whether a finished run has proven
that it imported everything its source holds, decided from its kinds' verdicts alone.

The rules (docs/kubernetes.md#complete), in this order:

1. a kind ``short`` or ``refused``: False, reason ``Short`` (or ``Refused``), whatever the state;
2. the run did not finish: Unknown, ``NotFinished``;
3. it failed or was cancelled: False, ``Failed`` or ``Cancelled``;
4. it succeeded with no kind ``unverified`` (each ``reconciled`` or ``verified``): True,
   ``Reconciled`` (``Verified`` when a verification proved every kind);
5. it succeeded with some kind ``unverified``, or with no verdict kept: Unknown,
   ``Unverified``: nothing contradicts it, nothing proves it (a verification can).

Pure: no I/O, no kopf.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ferryman_operator.reconcile import conditions as cond
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_worker.contract import KindVerdict, RunProgress, RunState

PROVEN: Final = frozenset({"reconciled", "verified"})
FAILING: Final = {"short": "Short", "refused": "Refused"}
NOTES: Final = 4096


def verdicts(run: RunProgress) -> list[dict[str, Any]]:
    """``status.verdicts``: each kind's verdict, camelCase, with ``shortBy`` for a short one
    (a count the verdict has not is left out)."""
    return [_verdict(found) for found in run.verdicts]


def _verdict(found: KindVerdict) -> dict[str, Any]:
    fields = {
        "kind": found.kind,
        "verdict": found.verdict,
        "listed": found.listed,
        "total": found.total,
        "shortBy": found.shortfall,
        "note": found.note[:NOTES],
    }
    return {key: value for key, value in fields.items() if value is not None}


def condition(run: RunProgress | None, refused: bool = False) -> Wanted:
    """The ``Complete`` condition of ``run`` (None: not admitted; ``refused``: it never will
    be, until retried)."""
    if run is None:
        if refused:
            return Wanted(cond.COMPLETE, "False", "NotAdmitted", "the run was refused: nothing ran")
        return Wanted(cond.COMPLETE, "Unknown", "NotFinished", "the run has not started")
    failing = [found for found in run.verdicts if found.verdict in FAILING]
    if failing:
        reason = FAILING[failing[0].verdict]
        return Wanted(cond.COMPLETE, "False", reason, _notes(failing))
    if not run.state.finished:
        return Wanted(cond.COMPLETE, "Unknown", "NotFinished", _so_far(run.verdicts))
    if run.state is not RunState.SUCCEEDED:
        message = f"the run {run.state.value.lower()}: {run.error or 'no error recorded'}"
        return Wanted(cond.COMPLETE, "False", run.state.value, message)
    open_ = [found for found in run.verdicts if found.verdict not in PROVEN]
    if open_ or not run.verdicts:
        return Wanted(cond.COMPLETE, "Unknown", "Unverified", _unverified(open_))
    verified = all(found.verdict == "verified" for found in run.verdicts)
    return Wanted(
        cond.COMPLETE, "True", "Verified" if verified else "Reconciled", _proven(run.verdicts)
    )


def _notes(found: Sequence[KindVerdict]) -> str:
    return "; ".join(f"{v.kind} {v.verdict}: {v.note}" for v in found)[: cond.MESSAGE]


def _so_far(found: Sequence[KindVerdict]) -> str:
    if not found:
        return "the run has not finished; no kind is judged yet"
    judged = ", ".join(f"{v.kind} {v.verdict}" for v in found)
    return f"the run has not finished; so far {judged}"


def _unverified(found: Sequence[KindVerdict]) -> str:
    if not found:
        return "the run kept no verdict of its kinds: nothing proves it complete"
    kinds = "; ".join(f"{v.kind}: {v.note}" for v in found)
    return (
        f"succeeded, but not proven complete: {kinds} (a verification lists the source's ids"
        " again and compares them with the ledger)"
    )[: cond.MESSAGE]


def _proven(found: Sequence[KindVerdict]) -> str:
    kinds = "; ".join(f"{v.kind} {v.verdict} ({v.note})" for v in found)
    return f"every kind adds up to what its source holds: {kinds}"[: cond.MESSAGE]
