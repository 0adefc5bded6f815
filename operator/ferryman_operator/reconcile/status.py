"""A run's ``.status`` from one observation: the database's aggregate of the run (if it was
admitted), or why it waits or was refused, and what the operator knows of the workers."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

from ferryman_operator.reconcile import complete
from ferryman_operator.reconcile import conditions as cond
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_worker import contract
from ferryman_worker.contract import Retrying, RunEta, RunProgress, RunState, cause

_KEPT = (
    *("state", "phase", "tasksDone", "tasksTotal", "rowsWritten", "rowsSkipped", "rowsMatched"),
    "rowsFailed",
    *("startedAt", "finishedAt", "lastRetry", "verdicts", "verification"),
)


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a run will not be admitted (until retried): a CamelCase reason and words."""

    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class Observation:
    """What one look at a run found; every field but ``workers`` is optional."""

    workers: Wanted
    """The WorkersReady condition the pool spec's sizing gives (see ``reconcile.pool``)."""

    progress: RunProgress | None = None
    """The run's aggregate, once admitted."""

    waiting: str | None = None
    """Why it is queued (a message naming the live or older run), when it waits."""

    refused: Refusal | None = None
    """Why it will not start, when refused."""

    database_error: str | None = None
    """Why PostgreSQL could not be asked (the last known status is kept)."""

    retrying: Retrying | None = None
    """The "retrying N task(s) …" line of a running run whose tasks wait to try again, and
    the cause their latest failure names."""

    eta: RunEta | None = None
    """The time a running run has left (``contract.eta``)."""


def compute(
    previous: Mapping[str, Any],
    seen: Observation,
    generation: int | None,
    now: datetime.datetime,
) -> dict[str, Any]:
    """The whole new status (camelCase), from the previous one and ``seen``."""
    status: dict[str, Any] = {key: previous[key] for key in _KEPT if key in previous}
    status.update(_fields(previous, seen))
    status["tasksSummary"] = f"{status.get('tasksDone', 0)}/{status.get('tasksTotal', 0)}"
    status["observedGeneration"] = generation
    wanted = _conditions(previous, seen)
    status["conditions"] = cond.merge(previous.get("conditions") or [], wanted, now, generation)
    status["reason"], status["message"] = headline(status["conditions"], seen)
    return status


def _fields(previous: Mapping[str, Any], seen: Observation) -> dict[str, Any]:
    run = seen.progress
    if run is not None:
        return {
            "state": run.state.value,
            "phase": run.phase,
            "tasksDone": run.tasks_done,
            "tasksTotal": run.tasks_total,
            "rowsWritten": run.rows_written,
            "rowsSkipped": run.rows_skipped,
            "rowsMatched": run.rows_matched,
            "rowsFailed": run.rows_failed,
            "startedAt": cond.timestamp(run.started_at),
            "finishedAt": cond.timestamp(run.finished_at) if run.finished_at else None,
            "eta": _eta(seen),
            "verdicts": complete.verdicts(run),
            "verification": _verification(run),
        }
    if seen.refused is not None:
        return {"state": RunState.FAILED.value, "phase": None}
    if seen.waiting is not None:
        return {"state": RunState.QUEUED.value, "phase": None}
    if seen.database_error is not None:
        return {"state": previous.get("state") or RunState.PENDING.value}
    return {"state": RunState.PENDING.value, "phase": None}


def _conditions(previous: Mapping[str, Any], seen: Observation) -> list[Wanted]:
    if seen.database_error is not None and seen.progress is None:
        kept = [
            Wanted(c["type"], c["status"], c["reason"], c.get("message", ""))
            for c in previous.get("conditions") or []
            if c.get("type") in (cond.ADMITTED, cond.COMPLETE, cond.FAILED)
        ]
        unavailable = Wanted(
            cond.PROGRESSING,
            "Unknown",
            "DatabaseUnavailable",
            f"cannot reach PostgreSQL ({seen.database_error}); the operator keeps trying and "
            "the last known counts stay shown",
        )
        return [*kept, unavailable, seen.workers]
    return [
        _admitted(seen),
        _progressing(seen),
        _complete(seen),
        _failed(seen),
        seen.workers,
    ]


def _admitted(seen: Observation) -> Wanted:
    if seen.progress is not None:
        run = seen.progress
        return Wanted(
            cond.ADMITTED, "True", "Admitted", f"admitted as run {run.id} of {run.workspace}"
        )
    if seen.refused is not None:
        return Wanted(cond.ADMITTED, "False", seen.refused.reason, seen.refused.message)
    if seen.waiting is not None:
        return Wanted(cond.ADMITTED, "False", "WorkspaceBusy", seen.waiting)
    return Wanted(cond.ADMITTED, "Unknown", "Pending", "waiting for the operator to admit it")


def _progressing(seen: Observation) -> Wanted:
    run = seen.progress
    if run is None:
        if seen.refused is not None:
            return Wanted(cond.PROGRESSING, "False", seen.refused.reason, seen.refused.message)
        if seen.waiting is not None:
            return Wanted(cond.PROGRESSING, "False", "Queued", seen.waiting)
        return Wanted(cond.PROGRESSING, "Unknown", "Pending", "not admitted yet")
    if run.state is RunState.RUNNING:
        if run.suspended:
            return Wanted(
                cond.PROGRESSING,
                "False",
                "Suspended",
                "suspended by spec.suspend: running tasks stopped at their next window; set "
                "suspend: false to resume",
            )
        if seen.retrying is not None and seen.retrying.cause is not None:
            return Wanted(cond.PROGRESSING, "False", seen.retrying.cause, seen.retrying.line)
        if seen.retrying is not None:
            return Wanted(cond.PROGRESSING, "True", "Retrying", seen.retrying.line)
        return Wanted(cond.PROGRESSING, "True", "Running", _doing(run, seen.eta))
    return Wanted(cond.PROGRESSING, "False", run.state.value, _ended(run))


def _complete(seen: Observation) -> Wanted:
    return complete.condition(seen.progress, refused=seen.refused is not None)


def _failed(seen: Observation) -> Wanted:
    run = seen.progress
    if run is not None and run.state is RunState.FAILED:
        return Wanted(cond.FAILED, "True", cause(run.error) or "RunFailed", _ended(run))
    if run is None and seen.refused is not None:
        return Wanted(cond.FAILED, "True", seen.refused.reason, seen.refused.message)
    return Wanted(cond.FAILED, "False", "NoFailure", "")


def _doing(run: RunProgress, eta: RunEta | None) -> str:
    where = f"phase {run.phase} ({run.phase_index + 1} of {run.phases})" if run.phase else "running"
    return (
        f"{where}: {run.tasks_done}/{run.tasks_total} tasks done, {run.tasks_running} running; "
        f"{run.rows_written} rows written" + (f"; {eta.message}" if eta is not None else "")
    )


def _eta(seen: Observation) -> dict[str, Any] | None:
    """``status.eta`` of a running run (None removes it once the run stops or is suspended)."""
    run = seen.progress
    if seen.eta is None or run is None or run.state is not RunState.RUNNING or run.suspended:
        return None
    return seen.eta.model_dump(by_alias=True, mode="json")


def _verification(run: RunProgress) -> dict[str, Any] | None:
    """``status.verification``: the run's latest verification (None: none was asked for)."""
    if run.verification is None:
        return None
    found = contract.verification_status(run.verification)
    return found.model_dump(by_alias=True, mode="json", exclude_none=True)


def _ended(run: RunProgress) -> str:
    counts = (
        f"{run.rows_written} rows written, {run.rows_failed} malformed rows not written "
        f"(`ferryman errors {run.name}`)"
        if run.rows_failed
        else f"{run.rows_written} rows written"
    )
    if run.state is RunState.FAILED:
        return f"failed: {run.error or 'no error recorded'}; {counts}"
    if run.state is RunState.CANCELLED:
        return f"cancelled ({run.error or 'by request'}); {counts}"
    return f"succeeded: {counts}"


def headline(conditions: list[dict[str, Any]], seen: Observation) -> tuple[str, str]:
    """``status.reason`` and ``status.message``: what most needs saying: a failure, an
    outage, a task failing for a cause it names, a wait, the workers' sizing, retries; else
    the progress (the Progressing condition's)."""
    for kind, status in (
        (cond.FAILED, "True"),
        (cond.PROGRESSING, "Unknown"),
        (cond.ADMITTED, "False"),
        (cond.WORKERS_READY, "False"),
    ):
        found = cond.find(conditions, kind)
        if found is not None and found.get("status") == status and found.get("message"):
            return str(found["reason"]), str(found["message"])
    progressing = cond.find(conditions, cond.PROGRESSING) or {}
    reason = str(progressing.get("reason") or "")
    if seen.retrying is not None:
        return reason, seen.retrying.line
    return reason, str(progressing.get("message") or "")
