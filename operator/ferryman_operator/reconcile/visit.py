"""One reconcile of a run, decided: what its visit of the database is to do (admit it or hold it
back, start a run whose start was cut short, suspend, resume, reopen, verify), what the visit's
facts say (the Observation its status is computed from, the retry it answered, the Events of its
statements), and what to write (the status keys that changed and the Events).

The visit itself (``ferryman_operator.statements``) reads and writes the database and decides
nothing; every choice it makes is asked of ``held``, ``cut_short`` and ``plan`` here.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any, Literal

from ferryman_operator.reconcile import admission, definitions, lifecycle, status
from ferryman_operator.reconcile.admission import Candidate
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_operator.reconcile.definitions import Resolved
from ferryman_operator.reconcile.events import Event, between
from ferryman_operator.reconcile.status import Observation, Refusal
from ferryman_worker import contract
from ferryman_worker.contract import Retrying, RunEta, RunProgress, RunState
from ferryman_worker.runspec import RETRY_ANNOTATION, VERIFY_ANNOTATION


@dataclasses.dataclass(frozen=True)
class Asked:
    """What the operator knows of a run before its visit of the database."""

    run: contract.MigrationRun
    old: Mapping[str, Any]
    """Its status before this reconcile."""

    workers: Wanted
    """The WorkersReady condition the pool spec's sizing gives."""

    retry: str | None = None
    """The ferryman.dev/retry annotation's value."""

    verify: str | None = None
    """The ferryman.dev/verify annotation's value, acted on once the run finished."""

    ahead: Candidate | None = None
    """The older queued run of its workspace it waits behind, if any."""

    readmit: bool = False
    """A refused run is examined again as if retried: what it names changed."""

    sealed: contract.Sealed | Refusal | None = None
    """Its credential as its Secret is now (or why it cannot be used), when it may be admitted
    or retried; None: an admitted run keeps the credential it was admitted with."""

    resolved: Resolved | Refusal | None = None
    """Its provider and mapping as their resources are now (or why not), when it may be
    admitted or retried."""

    @property
    def retried(self) -> bool:
        """A ferryman.dev/retry value this visit answers (not acted on yet)."""
        return lifecycle.retry_requested(self.retry, self.old.get("lastRetry"))

    @property
    def readmitting(self) -> bool:
        """Examined again, and refused before: admitted if it now may be."""
        return self.readmit and admission.previous_refusal(self.old) is not None

    @property
    def may_admit(self) -> bool:
        """Whether this visit may admit the run (or retry it): it waits, a retry is asked for,
        or it is examined again; only then are its credential and definitions read."""
        waits = self.old.get("state") in admission.WAITING_STATES
        return self.readmitting or waits or self.retried

    @property
    def credential(self) -> contract.Sealed | None:
        """The sealed credential to admit or reopen it with (None: none, or refused)."""
        return None if isinstance(self.sealed, Refusal) else self.sealed

    @property
    def definitions(self) -> Resolved:
        """The provider definition and mapping to snapshot into it (none: the built-ins)."""
        return self.resolved if isinstance(self.resolved, Resolved) else Resolved()


def asked(
    body: Mapping[str, Any],
    run: contract.MigrationRun,
    old: Mapping[str, Any],
    workers: Wanted,
    ahead: Candidate | None,
    readmit: bool = False,
) -> Asked:
    """What a reconcile of the run ``body`` (``run``, parsed) asks, its annotations read."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    return Asked(
        run,
        old,
        workers,
        retry=annotations.get(RETRY_ANNOTATION),
        verify=annotations.get(VERIFY_ANNOTATION),
        ahead=ahead,
        readmit=readmit,
    )


def before(body: Mapping[str, Any], written: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The status a reconcile of ``body`` starts from. Handlers of one object run one after the
    other, each with the body kopf saw before the last patch landed: the status this process
    wrote last (``written``, the object's uid under ``_uid``) is the newer "before", unless it
    was another object's of the same name. None: ``body`` is older than the status written last
    (the next call has a newer one)."""
    meta = body["metadata"]
    if written is not None and meta.get("uid") != written.get("_uid"):
        written = None  # a new object of the same name
    if written is not None and (written.get("observedGeneration") or 0) > (
        meta.get("generation") or 0
    ):
        return None
    old = written if written is not None else dict(body.get("status") or {})
    return {key: value for key, value in old.items() if key != "_uid"}


def held(asked: Asked) -> Observation | None:
    """Why the run, which the database does not know, is not admitted by this visit: refused
    before (and neither retried nor examined again), its credential or its definitions refused,
    or an older queued run of its workspace ahead; None: admit it."""
    refusal = admission.previous_refusal(asked.old)
    if refusal is not None and not asked.retried and not asked.readmitting:
        return Observation(asked.workers, refused=refusal)
    for refused in (asked.sealed, asked.resolved):
        if isinstance(refused, Refusal):
            return Observation(asked.workers, refused=refused)
    return admission.behind(asked.run, asked.ahead, asked.workers)


def cut_short(progress: RunProgress) -> bool:
    """Admitted by a process that died before starting it: running, without a task."""
    return progress.state is RunState.RUNNING and progress.tasks_total == 0


@dataclasses.dataclass(frozen=True)
class Plan:
    """The statements a visit makes to an admitted run, in this order."""

    suspension: Literal["suspend", "resume"] | None = None
    """What makes its suspension match ``spec.suspend``."""

    reopen: bool = False
    """Reopen the failed run from its checkpoints (a retry, with its credential sealed anew)."""

    verify: str | None = None
    """Queue a verification that answers this ferryman.dev/verify value."""

    reread: bool = False
    """Read its aggregate again afterwards: a statement was made, or a retry answered."""


def plan(asked: Asked, progress: RunProgress) -> Plan:
    """What the visit does to the admitted run whose aggregate is ``progress``."""
    running = progress.state is RunState.RUNNING
    suspension = lifecycle.suspension(asked.run.spec.suspend, running, progress.suspended)
    failed = progress.state is RunState.FAILED
    verify = lifecycle.verify_requested(
        asked.verify, progress.state.finished, lifecycle.answered(progress)
    )
    return Plan(
        suspension=suspension,
        reopen=asked.retried and failed and not isinstance(asked.sealed, Refusal),
        verify=asked.verify if verify else None,
        reread=bool(suspension) or asked.retried or verify,
    )


@dataclasses.dataclass(frozen=True)
class Facts:
    """What one visit of the database found of the run, and what its statements met."""

    progress: RunProgress | None = None
    """The run's aggregate once the visit's statements were made; None: it is not admitted."""

    found: RunProgress | None = None
    """Its aggregate as the statements were decided from it (``plan``): once admitted, and
    started if its start was cut short."""

    refused: contract.FerrymanError | None = None
    """The database's refusal to admit it: WorkspaceOwned, AdmissionRefused (naming the live
    run of its workspace), MappingInvalid (the catalog's answer) or another
    ConfigurationError."""

    reopen_refused: str | None = None
    """Why the database would not reopen the failed run (its workspace has a live run)."""

    retrying: Retrying | None = None
    """The running run's tasks that wait to try again."""

    eta: RunEta | None = None
    """The time the running run has left."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a reconcile observed of the run: what its status is computed from, the retry value
    it answered (``status.lastRetry``), and the Events of the visit's statements."""

    seen: Observation
    retried: str | None = None
    events: tuple[Event, ...] = ()


def outcome(asked: Asked, facts: Facts) -> Outcome:
    """What the visit's ``facts`` say of the run ``asked`` described."""
    retried = asked.retry if asked.retried else None
    if facts.progress is None:
        return Outcome(_not_admitted(asked, facts.refused), retried)
    seen = Observation(
        asked.workers, progress=facts.progress, retrying=facts.retrying, eta=facts.eta
    )
    return Outcome(seen, retried, _retry_events(asked, facts.found or facts.progress, facts))


def _not_admitted(asked: Asked, error: contract.FerrymanError | None) -> Observation:
    """Why the run is not admitted: held back (``held``), or refused by the database."""
    run, workers = asked.run, asked.workers
    if error is None:
        return held(asked) or Observation(workers)
    if isinstance(error, contract.WorkspaceOwned):
        return Observation(workers, refused=Refusal("WorkspaceOwned", str(error)))
    if isinstance(error, contract.AdmissionRefused):
        return admission.busy(run, error.live_run, workers)
    if isinstance(error, contract.MappingInvalid):
        refusal = definitions.refused_by_catalog(run.spec.mapping, run.metadata.namespace, error)
        return Observation(workers, refused=refusal)
    return Observation(workers, refused=Refusal("AdmissionFailed", str(error)))


def _retry_events(asked: Asked, found: RunProgress, facts: Facts) -> tuple[Event, ...]:
    """A Warning when a retry asked for was not done: the run did not fail, its credential was
    refused, or its workspace has another live run."""
    if not asked.retried:
        return ()
    if found.state is not RunState.FAILED:
        message = f"only a failed run is retried; this one is {found.state.value}"
        return (Event("Warning", "RetryIgnored", message),)
    if isinstance(asked.sealed, Refusal):
        return (Event("Warning", "RetryRefused", asked.sealed.message),)
    if facts.reopen_refused is not None:
        return (Event("Warning", "RetryRefused", facts.reopen_refused),)
    return ()


@dataclasses.dataclass(frozen=True)
class Decision:
    """One reconcile's outcome: the status keys that changed (None deletes one), the Events, the
    whole new status, and when it was decided."""

    changes: dict[str, Any]
    events: list[Event]
    status: dict[str, Any]
    now: datetime.datetime


def decision(
    stored: Mapping[str, Any],
    old: Mapping[str, Any],
    observed: Outcome,
    generation: int | None,
    now: datetime.datetime,
) -> Decision:
    """The new status from ``old`` (the status reconciled from) and what was ``observed``; its
    changes against ``stored`` (the object's own status); the visit's Events, then those of the
    move from ``old``."""
    new = status.compute(old, observed.seen, generation, now)
    if observed.retried is not None:
        new["lastRetry"] = observed.retried
    return Decision(
        changes={key: value for key, value in new.items() if stored.get(key) != value},
        events=[*observed.events, *between(old, new, observed.seen.progress)],
        status=new,
        now=now,
    )
