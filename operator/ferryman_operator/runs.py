"""One MigrationRun, reconciled: observe (parse the spec, ask the database through the
contract, admitting, suspending, resuming or retrying on the way), decide its status and Events
(``reconcile``), write them. Level-based: every call starts from what is, so a call that was cut
short (a crash, an outage) is finished by the next one; the refresh of every live run (``fleet``)
makes one every few seconds, from one read of them all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ferryman_operator.credentials import Credentials
from ferryman_operator.database import Database
from ferryman_operator.definitions import Definitions
from ferryman_operator.errors import DatabaseUnavailable
from ferryman_operator.kube import Kube, NotLeading
from ferryman_operator.metrics import OperatorMetrics
from ferryman_operator.reconcile import (
    admission,
    allowlist,
    conditions,
    definitions,
    lifecycle,
    refresh,
    status,
)
from ferryman_operator.reconcile.admission import Candidate
from ferryman_operator.reconcile.definitions import Resolved
from ferryman_operator.reconcile.events import Event, between
from ferryman_operator.reconcile.status import Observation, Refusal
from ferryman_operator.resources import events
from ferryman_operator.workers import Workers
from ferryman_worker import contract
from ferryman_worker.runspec import RETRY_ANNOTATION, VERIFY_ANNOTATION

log = logging.getLogger("ferryman.operator.runs")
DELETED = "the MigrationRun was deleted: its tasks stop at their next window; the rows written stay"


@dataclasses.dataclass(frozen=True)
class Prefetched:
    """What one read of every live run found (``contract.live_progress``), by run key; or why
    the database could not be asked."""

    runs: Mapping[str, contract.LiveRun]
    error: str | None = None

    @functools.cached_property
    def busy(self) -> dict[str, str]:
        """Each workspace's running run, of those read."""
        return {
            found.progress.workspace: name
            for name, found in self.runs.items()
            if found.progress.state is contract.RunState.RUNNING
        }


@dataclasses.dataclass(frozen=True)
class Decision:
    """One reconcile's outcome: the status keys that changed (None deletes one), the Events, the
    whole new status, and when it was decided."""

    changes: dict[str, Any]
    events: list[Event]
    status: dict[str, Any]
    now: datetime.datetime


@dataclasses.dataclass
class Look:
    """What one database visit found and did."""

    seen: Observation
    retried: str | None = None
    events: list[Event] = dataclasses.field(default_factory=list)


Live = Mapping[str, Iterable[Mapping[str, Any]]]
"""kopf's ``live`` index: each live run's key to (one) copy of its object, kept current by the
watch; a finished run leaves it."""


def candidate(body: Mapping[str, Any]) -> Candidate:
    meta, spec = body.get("metadata", {}), body.get("spec") or {}
    return Candidate(
        created=str(meta.get("creationTimestamp", "")),
        key=f"{meta.get('namespace')}/{meta.get('name')}",
        workspace=str(spec.get("workspace", "")),
        state=(body.get("status") or {}).get("state"),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def current(live: Live, key: str) -> Mapping[str, Any] | None:
    """The run ``key``'s object as ``live`` holds it now; None when it finished, went, or is
    being deleted."""
    for body in live.get(key, ()):
        if not candidate(body).deleting:
            return body
    return None


class Runs:
    def __init__(
        self,
        db: Database,
        kube: Kube,
        workers: Workers,
        metrics: OperatorMetrics,
        acting: Callable[[], bool] = lambda: True,
        credentials: Credentials | None = None,
        allowed: Sequence[allowlist.Pattern] = (),
        destinations: contract.DestinationPolicy | None = None,
    ) -> None:
        self._db, self._kube, self._workers = db, kube, workers
        self._destinations = destinations or contract.DestinationPolicy()
        self._credentials = credentials
        self._allowed = tuple(allowed)  # the installation's allowedSourceURLs (empty: any)
        self._definitions = Definitions(kube)
        self._metrics = metrics
        self._acting = acting  # the Lease is held: admit, write status and Events
        self._locks: dict[str, asyncio.Lock] = {}
        self._written: dict[str, dict[str, Any]] = {}
        self._decided: dict[str, tuple[Any, ...]] = {}  # what a refresh decided each run from

    async def sync(
        self,
        body: Mapping[str, Any],
        patch: Any,
        others: Iterable[Candidate],
        handler: str = "sync",
    ) -> None:
        """Reconcile the run ``body``; the new status goes into kopf's ``patch``. ``handler``
        names the kopf handler in the metrics."""
        me = candidate(body)
        async with self._lock(me.key):
            if not self._acting():
                log.debug("run %s: not holding the Lease: left to the leader", me.key)
                return
            decided = await self._decide(body, me, list(others), handler, None)
            if decided is None:
                return
            for key, value in decided.changes.items():
                patch.status[key] = value
            events.post(body, decided.events)
            await self._expire(body, decided.status, decided.now)

    async def refresh(self, live: Live, waiting: Mapping[str, Iterable[Candidate]]) -> None:
        """One refresh of the live runs of kopf's ``live`` index (``waiting``: every run by
        workspace): their progress and ETAs read at once (``contract.live_progress``), then each
        run decided alone, its status patched where it changed. A run that needs a statement of
        its own (admission, suspension, resumption, a retry) makes it then."""
        if not self._acting():
            return
        keys = [key for key in list(live) if current(live, key) is not None]
        found = await self._read_live(keys)
        for key in keys:
            try:
                with self._metrics.handling("refresh"):
                    await self._refresh_one(live, key, waiting, found)
            except NotLeading:
                return
            except Exception:
                log.exception("run %s: the refresh failed; the next one tries again", key)

    async def reexamine_all(
        self, bodies: Iterable[Mapping[str, Any]], waiting: Mapping[str, Iterable[Candidate]]
    ) -> None:
        """Examine again the refused runs ``bodies`` (oldest first), as if they were retried: a
        MigrationProvider or MigrationMapping they name was created or changed
        (``reconcile.readmission``). Each is admitted, queued, or refused again (its status
        written only where it changed); one that fails is logged and the others go on."""
        if not self._acting():
            return
        for body in bodies:
            me = candidate(body)
            try:
                with self._metrics.handling("reexamined"):
                    await self._reexamine(body, me, list(waiting.get(me.workspace, [])))
            except NotLeading:
                return
            except Exception:
                log.exception(
                    "run %s: examining the refused run again failed; the next change of what it"
                    " names tries again (or retry it with the annotation %s)",
                    me.key,
                    RETRY_ANNOTATION,
                )

    async def _reexamine(
        self, body: Mapping[str, Any], me: Candidate, others: list[Candidate]
    ) -> None:
        async with self._lock(me.key):
            if not self._acting():
                return
            decided = await self._decide(body, me, others, "reexamined", None, readmit=True)
            if decided is not None:
                await self._write(body, decided)

    async def _read_live(self, keys: list[str]) -> Prefetched:
        if not keys:
            return Prefetched({})
        now = _utcnow()
        try:
            return Prefetched(
                await self._db.run(lambda conn: contract.live_progress(conn, keys, now))
            )
        except DatabaseUnavailable as exc:
            return Prefetched({}, error=str(exc))

    async def _refresh_one(
        self,
        live: Live,
        key: str,
        waiting: Mapping[str, Iterable[Candidate]],
        found: Prefetched,
    ) -> None:
        """Decide the run ``key`` from its object as the index holds it once its lock is held,
        not from a copy taken before: a run that finished meanwhile (a handler refused or
        admitted it, and its end let this process forget the status it wrote) has left the index,
        and its older copy would be decided again as if never decided: refused or admitted a
        second time, its Events posted and its admission or refusal counted again."""
        async with self._lock(key):
            body = current(live, key)
            if body is None or not self._acting():
                return
            me = candidate(body)
            others = list(waiting.get(me.workspace, []))
            workers = self._workers.condition(body["metadata"]["namespace"])
            inputs = _inputs(body, me, others, found, workers)
            if inputs is not None and self._decided.get(key) == inputs:
                return  # nothing it is decided from has changed since: nor would its status
            decided = await self._decide(body, me, others, "refresh", found)
            if decided is None:
                return
            await self._write(body, decided)
            if inputs is not None:
                self._decided[key] = inputs

    async def _write(self, body: Mapping[str, Any], decided: Decision) -> None:
        """The status keys that changed and the Events, through the API (outside a handler of
        the run: kopf's patch is not there to carry them)."""
        meta = body["metadata"]
        if decided.changes:
            await self._kube.patch_run_status(meta["namespace"], meta["name"], decided.changes)
        await events.create(self._kube, body, decided.events)
        await self._expire(body, decided.status, decided.now)

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    async def _decide(
        self,
        body: Mapping[str, Any],
        me: Candidate,
        others: list[Candidate],
        handler: str,
        found: Prefetched | None,
        readmit: bool = False,
    ) -> Decision | None:
        """The run's new status and Events (None: ``body`` is older than the status this process
        wrote last); ``found``: what a fleet-wide read already knows of it; ``readmit``: a
        refused run is examined again as if retried (what it names changed)."""
        now = datetime.datetime.now(datetime.UTC)
        meta = body["metadata"]
        stored: dict[str, Any] = dict(body.get("status") or {})
        # Handlers of one object run one after the other, each with the body kopf saw before
        # the last patch landed: the status this process wrote last is the newer "before".
        written = self._written.get(me.key)
        if written is not None and meta.get("uid") != written.get("_uid"):
            written = None  # a new object of the same name
        if written is not None and (written.get("observedGeneration") or 0) > (
            meta.get("generation") or 0
        ):
            return None  # a body older than the status written last: the next has a newer one
        old = written if written is not None else stored
        old = {key: value for key, value in old.items() if key != "_uid"}
        workers = self._workers.condition(meta["namespace"])
        try:
            run = contract.parse_run(dict(body), source=me.key)
        except contract.ConfigurationError as exc:
            look = Look(Observation(workers, refused=Refusal("InvalidSpec", str(exc))))
        else:
            look = await self._observe(run, body, old, me, others, workers, now, found, readmit)
        if not self._acting():  # the leadership ran out while the database answered
            return None
        new = status.compute(old, look.seen, meta.get("generation"), now)
        self._metrics.status_changed(old, new)
        if look.seen.database_error is not None:
            self._metrics.reconcile_error(handler, look.seen.database_error)
        if look.retried is not None:
            new["lastRetry"] = look.retried
        self._written[me.key] = {**new, "_uid": meta.get("uid")}
        return Decision(
            changes={key: value for key, value in new.items() if stored.get(key) != value},
            events=[*look.events, *between(old, new, look.seen.progress)],
            status=new,
            now=now,
        )

    async def _observe(
        self,
        run: contract.MigrationRun,
        body: Mapping[str, Any],
        old: Mapping[str, Any],
        me: Candidate,
        others: list[Candidate],
        workers: conditions.Wanted,
        now: datetime.datetime,
        found: Prefetched | None,
        readmit: bool = False,
    ) -> Look:
        annotations = body["metadata"].get("annotations") or {}
        annotation, verify = annotations.get(RETRY_ANNOTATION), annotations.get(VERIFY_ANNOTATION)
        ahead = admission.ahead_of(me, others)
        if found is not None and found.error is not None:
            return self._unavailable(me, old, workers, found.error)
        if found is not None:
            known = refresh.settled(
                found.runs.get(me.key), run, old, annotation, ahead, workers, found.busy, verify
            )
            if known is not None:
                return Look(known)
        width = self._workers.lane_width(run.metadata.namespace)
        readmit = readmit and refresh.previous_refusal(old) is not None
        may = readmit or _may_admit(old, annotation)
        resolved = await self._definitions.resolve(run) if may else None
        sealed = await self._seal(run, may, resolved)
        try:
            return await self._db.run(
                lambda conn: _look(
                    conn,
                    run,
                    old,
                    annotation,
                    ahead,
                    width,
                    workers,
                    now,
                    sealed,
                    resolved,
                    readmit,
                    self._destinations,
                    verify,
                )
            )
        except DatabaseUnavailable as exc:
            return self._unavailable(me, old, workers, str(exc))

    def _unavailable(
        self, me: Candidate, old: Mapping[str, Any], workers: conditions.Wanted, error: str
    ) -> Look:
        already = conditions.reason_of(old.get("conditions") or [], conditions.PROGRESSING)
        said = log.debug if already == "DatabaseUnavailable" else log.warning  # once an outage
        said("run %s: database unavailable: %s", me.key, error)
        return Look(Observation(workers, database_error=error))

    async def _seal(
        self, run: contract.MigrationRun, may: bool, resolved: Resolved | Refusal | None
    ) -> contract.Sealed | Refusal | None:
        """The run's credential, sealed from its Secret, when this visit ``may`` admit or retry
        it (else None: an admitted run keeps the credential it was admitted with); a Refusal when
        its baseURL or its provider's token URL (from ``resolved``, the provider it would be
        admitted with) is not allowed, or its credential cannot be used."""
        if not may:
            return None
        local = contract.local_binding_refused(run)
        if local is not None:
            return Refusal("InvalidSpec", local)
        token_url: str | None = None
        keys: tuple[str, ...] = ()
        if isinstance(resolved, Resolved):
            token_url = contract.token_url(run, resolved.provider)
            keys = contract.credential_keys(run, resolved.provider)
        source = run.spec.source
        refused = allowlist.refusal(source.base_url, self._allowed, token_url, source.provider)
        if refused is not None or self._credentials is None:
            return refused
        allowed = tuple(pattern.text for pattern in self._allowed)
        return await self._credentials.seal(run, token_url, allowed, keys)

    async def _expire(
        self, body: Mapping[str, Any], new: Mapping[str, Any], now: datetime.datetime
    ) -> None:
        left = _ttl_left({**body, "status": new}, now)
        if left is not None and left <= 0:
            meta = body["metadata"]
            log.info(
                "run %s/%s: ttlSecondsAfterFinished passed: deleting it",
                meta["namespace"],
                meta["name"],
            )
            await self._kube.delete_run(meta["namespace"], meta["name"])

    def forget(self, body: Mapping[str, Any]) -> None:
        """Release what this process keeps of a run whose end its object shows (or that is
        gone): the status it wrote last, and its lock unless a handler holds it."""
        key = candidate(body).key
        self._written.pop(key, None)
        self._decided.pop(key, None)
        lock = self._locks.get(key)
        if lock is not None and not lock.locked():
            del self._locks[key]

    async def expire_when_due(self, body: Mapping[str, Any], stopped: Any) -> None:
        """Wait until the finished run's ttlSecondsAfterFinished passed, then delete it (an API
        error is tried again after a few seconds); return at once without a TTL, or when
        ``stopped`` (a kopf DaemonStopped) is set."""
        while not stopped:
            left = _ttl_left(body, _utcnow())
            if left is None:
                return
            if left > 0:
                await stopped.wait(left)
                continue
            try:
                await self._expire(body, dict(body.get("status") or {}), now=_utcnow())
                return
            except Exception as exc:  # the API away, or not leading: the next try decides
                log.warning("run %s: cannot delete it after its TTL: %s", candidate(body).key, exc)
                await stopped.wait(5.0)

    async def cancel(self, body: Mapping[str, Any]) -> bool:
        """Cancel the run being deleted (if it is live); raises DatabaseUnavailable (kopf retries,
        the object stays until it is done)."""
        meta = body["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"

        def stop(conn: contract.Connection) -> bool:
            found = contract.progress(conn, key)
            live = bool(found) and found[0].state is contract.RunState.RUNNING
            cancelled = live and contract.cancel(conn, key)
            contract.forget(conn, key)  # a new MigrationRun of this name is a new run
            return cancelled

        self.forget(body)
        cancelled = await self._db.run(stop)
        if cancelled:
            log.info("run %s: cancelled because its MigrationRun was deleted", key)
            events.post(body, [Event("Normal", "Cancelled", DELETED)])
        return cancelled


def _inputs(
    body: Mapping[str, Any],
    me: Candidate,
    others: list[Candidate],
    found: Prefetched,
    workers: conditions.Wanted,
) -> tuple[Any, ...] | None:
    """Everything a refresh decides the run ``body`` from (its object's version, what the read
    found of it and of its workspace, who is ahead of it, the workers' condition); None when the
    read failed."""
    if found.error is not None:
        return None
    return (
        body["metadata"].get("resourceVersion"),
        found.runs.get(me.key),
        admission.ahead_of(me, others),
        found.busy.get(me.workspace),
        workers,
    )


def _ttl_left(body: Mapping[str, Any], now: datetime.datetime) -> float | None:
    """Seconds until the finished run ``body`` (its status says so) is to be deleted; None:
    not finished, or no TTL."""
    status_now = body.get("status") or {}
    finished = (
        status_now.get("finishedAt")
        if status_now.get("state") in ("Succeeded", "Failed", "Cancelled")
        else None
    )
    ttl = (body.get("spec") or {}).get("ttlSecondsAfterFinished")
    if finished is None or ttl is None:
        return None
    at = datetime.datetime.fromisoformat(str(finished).replace("Z", "+00:00"))
    return lifecycle.ttl_left(int(ttl), at, now)


def _may_admit(old: Mapping[str, Any], annotation: str | None) -> bool:
    """Whether this visit may admit the run (or retry it): it waits, or a retry is asked for."""
    return old.get("state") in admission.WAITING_STATES or lifecycle.retry_requested(
        annotation, old.get("lastRetry")
    )


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _look(
    conn: contract.Connection,
    run: contract.MigrationRun,
    old: Mapping[str, Any],
    annotation: str | None,
    ahead: Candidate | None,
    width: int,
    workers: conditions.Wanted,
    now: datetime.datetime,
    sealed: contract.Sealed | Refusal | None = None,
    resolved: Resolved | Refusal | None = None,
    readmit: bool = False,
    destinations: contract.DestinationPolicy | None = None,
    verify: str | None = None,
) -> Look:
    """Everything one visit does in the database (on a thread). ``sealed``: the run's
    credential as its Secret is now (or why it cannot be used), ``resolved``: its provider and
    mapping as their resources are now (or why not), when it may be admitted or retried;
    ``readmit``: a refused run is admitted if it now may be (what it names changed);
    ``verify``: the ferryman.dev/verify annotation's value, acted on once the run finished."""
    key = contract.run_key(run)
    found = contract.progress(conn, key)
    retry = lifecycle.retry_requested(annotation, old.get("lastRetry"))
    look = Look(Observation(workers), retried=annotation if retry else None)
    if not found:
        refusal = refresh.previous_refusal(old)
        if refusal is not None and not retry and not readmit:
            look.seen = Observation(workers, refused=refusal)
            return look
        outcome = _admit(conn, run, ahead, width, workers, sealed, resolved, destinations)
        if outcome is not None:
            look.seen = outcome
            return look
        found = contract.progress(conn, key)
    progress = found[0]
    if progress.state is contract.RunState.RUNNING and progress.tasks_total == 0:
        contract.admit(conn, run, width)  # admitted by a process that died before starting it
        progress = contract.progress(conn, key)[0]
    action = lifecycle.suspension(
        run.spec.suspend, progress.state is contract.RunState.RUNNING, progress.suspended
    )
    if action == "suspend":
        contract.suspend(conn, key)
    elif action == "resume":
        contract.resume(conn, key)
    if retry and progress.state is contract.RunState.FAILED:
        if isinstance(sealed, Refusal):
            look.events.append(Event("Warning", "RetryRefused", sealed.message))
        else:
            try:
                contract.retry(conn, key, sealed=sealed)
            except contract.AdmissionRefused as exc:
                look.events.append(Event("Warning", "RetryRefused", str(exc)))
    elif retry:
        look.events.append(
            Event(
                "Warning",
                "RetryIgnored",
                f"only a failed run is retried; this one is {progress.state.value}",
            )
        )
    asked = lifecycle.verify_requested(verify, progress.state.finished, refresh.answered(progress))
    if asked and verify is not None:
        contract.verify(conn, key, verify)  # a worker's verification job does it
    if action or retry or asked:
        progress = contract.progress(conn, key)[0]
    retrying = (
        contract.retrying(conn, progress.id, now)
        if progress.state is contract.RunState.RUNNING
        else None
    )
    running = progress.state is contract.RunState.RUNNING
    eta = contract.eta(conn, progress.id) if running else None
    look.seen = Observation(workers, progress=progress, retrying=retrying, eta=eta)
    return look


def _admit(
    conn: contract.Connection,
    run: contract.MigrationRun,
    ahead: Candidate | None,
    width: int,
    workers: conditions.Wanted,
    sealed: contract.Sealed | Refusal | None = None,
    resolved: Resolved | Refusal | None = None,
    destinations: contract.DestinationPolicy | None = None,
) -> Observation | None:
    """Admit the run, or say why it waits or is refused (None: admitted). ``resolved``: the
    provider definition and mapping to snapshot into it."""
    if isinstance(sealed, Refusal):
        return Observation(workers, refused=sealed)
    if isinstance(resolved, Refusal):
        return Observation(workers, refused=resolved)
    found = resolved or Resolved()
    behind = refresh.behind(run, ahead, workers)
    if behind is not None:
        return behind
    try:
        contract.admit(
            conn,
            run,
            width,
            mapping=found.mapping,
            sealed=sealed,
            provider_definition=found.provider,
            destinations=destinations,
        )
    except contract.WorkspaceOwned as exc:
        return Observation(workers, refused=Refusal("WorkspaceOwned", str(exc)))
    except contract.AdmissionRefused as exc:
        return refresh.occupied(run, exc.live_run, workers)
    except contract.MappingInvalid as exc:
        refusal = definitions.refused_by_catalog(run.spec.mapping, run.metadata.namespace, exc)
        return Observation(workers, refused=refusal)
    except contract.ConfigurationError as exc:
        return Observation(workers, refused=Refusal("AdmissionFailed", str(exc)))
    return None
