"""One MigrationRun, reconciled: observe (parse the spec; read its provider, mapping and
credential when it may be admitted or retried; visit the database, ``statements``), decide its
status and Events (``reconcile.visit``), write them. Level-based: every call starts from what
is, so a call that was cut short (a crash, an outage) is finished by the next one; the refresh of
every live run (``fleet``) makes one every few seconds, from one read of them all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ferryman_operator import statements
from ferryman_operator.credentials import Credentials
from ferryman_operator.database import Database
from ferryman_operator.definitions import Definitions
from ferryman_operator.errors import DatabaseUnavailable
from ferryman_operator.kube import Kube, NotLeading
from ferryman_operator.metrics import OperatorMetrics
from ferryman_operator.reconcile import admission, allowlist, conditions, lifecycle, refresh, visit
from ferryman_operator.reconcile.admission import Candidate, candidate
from ferryman_operator.reconcile.definitions import Resolved
from ferryman_operator.reconcile.events import Event
from ferryman_operator.reconcile.refresh import Live, Prefetched
from ferryman_operator.reconcile.status import Observation, Refusal
from ferryman_operator.reconcile.visit import Decision
from ferryman_operator.resources import events
from ferryman_operator.workers import Workers
from ferryman_worker import contract
from ferryman_worker.runspec import RETRY_ANNOTATION

log = logging.getLogger("ferryman.operator.runs")
DELETED = "the MigrationRun was deleted: its tasks stop at their next window; the rows written stay"


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
        keys = [key for key in list(live) if refresh.current(live, key) is not None]
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
            body = refresh.current(live, key)
            if body is None or not self._acting():
                return
            me = candidate(body)
            others = list(waiting.get(me.workspace, []))
            workers = self._workers.condition(body["metadata"]["namespace"])
            inputs = refresh.inputs(body, me, others, found, workers)
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
        now = _utcnow()
        meta = body["metadata"]
        old = visit.before(body, self._written.get(me.key))
        if old is None:
            return None  # a body older than the status written last: the next has a newer one
        workers = self._workers.condition(meta["namespace"])
        try:
            run = contract.parse_run(dict(body), source=me.key)
        except contract.ConfigurationError as exc:
            refused = Refusal("InvalidSpec", str(exc))
            observed = visit.Outcome(Observation(workers, refused=refused))
        else:
            ahead = admission.ahead_of(me, others)
            asked = visit.asked(body, run, old, workers, ahead, readmit)
            observed = await self._observe(me.key, asked, found, now)
        if not self._acting():  # the leadership ran out while the database answered
            return None
        stored = dict(body.get("status") or {})
        decided = visit.decision(stored, old, observed, meta.get("generation"), now)
        self._metrics.status_changed(old, decided.status)
        if observed.seen.database_error is not None:
            self._metrics.reconcile_error(handler, observed.seen.database_error)
        self._written[me.key] = {**decided.status, "_uid": meta.get("uid")}
        return decided

    async def _observe(
        self,
        key: str,
        asked: visit.Asked,
        found: Prefetched | None,
        now: datetime.datetime,
    ) -> visit.Outcome:
        """What the run ``key`` is: from the fleet-wide read (``found``) when that says enough,
        else from a visit of its own, its credential and definitions read first when it may be
        admitted or retried."""
        if found is not None and found.error is not None:
            return self._unavailable(key, asked, found.error)
        if found is not None:
            known = refresh.settled(found.runs.get(key), asked, found.busy)
            if known is not None:
                return visit.Outcome(known)
        width = self._workers.lane_width(asked.run.metadata.namespace)
        if asked.may_admit:
            resolved = await self._definitions.resolve(asked.run)
            sealed = await self._seal(asked.run, resolved)
            asked = dataclasses.replace(asked, resolved=resolved, sealed=sealed)
        destinations = self._destinations
        try:
            facts = await self._db.run(
                lambda conn: statements.visit(conn, asked, width, destinations, now)
            )
        except DatabaseUnavailable as exc:
            return self._unavailable(key, asked, str(exc))
        return visit.outcome(asked, facts)

    def _unavailable(self, key: str, asked: visit.Asked, error: str) -> visit.Outcome:
        already = conditions.reason_of(asked.old.get("conditions") or [], conditions.PROGRESSING)
        said = log.debug if already == "DatabaseUnavailable" else log.warning  # once an outage
        said("run %s: database unavailable: %s", key, error)
        return visit.Outcome(Observation(asked.workers, database_error=error))

    async def _seal(
        self, run: contract.MigrationRun, resolved: Resolved | Refusal
    ) -> contract.Sealed | Refusal | None:
        """The run's credential, sealed from its Secret, when this visit may admit or retry it;
        a Refusal when its baseURL or its provider's token URL (from ``resolved``, the provider
        it would be admitted with) is not allowed, or its credential cannot be used; None when
        this operator seals no credential."""
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
        left = lifecycle.expires_in({**body, "status": new}, now)
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
            left = lifecycle.expires_in(body, _utcnow())
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
        self.forget(body)
        cancelled = await self._db.run(lambda conn: statements.cancel(conn, key))
        if cancelled:
            log.info("run %s: cancelled because its MigrationRun was deleted", key)
            events.post(body, [Event("Normal", "Cancelled", DELETED)])
        return cancelled


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
