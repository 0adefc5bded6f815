"""Only one operator acts: the holder of a coordination.k8s.io Lease.

Standard leader election, as client-go does it: a candidate takes the Lease when it has no
holder, or when its record has not changed for ``lease_duration`` seconds as this process
observed it (so clocks need not agree); the holder renews it every third of that. Writes carry
the resourceVersion read, so two candidates cannot both win. A holder that cannot renew in time
stops acting and stands by again, so two never act at once: each renewal has a deadline (the end
of the current lead, at most ``lease_duration`` minus the request timeout after the last
successful renewal began), and every write is gated by ``Lease.holding``.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from typing import Any

from kubernetes import client

from ferryman_operator.kube import Kube
from ferryman_operator.settings import OperatorSettings

log = logging.getLogger("ferryman.operator.leader")


class Lease:
    def __init__(self, kube: Kube, settings: OperatorSettings) -> None:
        self._api = kube.coordination
        self._name, self._namespace = settings.lease_name, settings.lease_namespace
        self._identity = settings.identity
        self._duration = settings.lease_duration
        self._renew = settings.renew_interval
        self._margin = settings.request_timeout
        self._seen: tuple[str | None, float] = (None, 0.0)
        self._valid_until = 0.0  # monotonic: acting stops here unless renewed before
        self.lost = False

    def holding(self) -> bool:
        """Whether this process may act: it holds the Lease, renewed recently enough that no
        standby can have taken it, nor can before a request sent now times out."""
        return not self.lost and time.monotonic() < self._valid_until

    async def acquire(self) -> None:
        """Wait until this process holds the Lease."""
        waiting_logged = False
        while not await self._renewed(self._renew):
            if not waiting_logged:
                log.info("waiting for Lease %s/%s", self._namespace, self._name)
                waiting_logged = True
            await asyncio.sleep(self._renew)
        log.info("holding Lease %s/%s as %s", self._namespace, self._name, self._identity)

    async def _renewed(self, deadline: float) -> bool:
        """One try to take or renew the Lease within ``deadline`` seconds. On success the leadership
        lasts until ``lease_duration`` minus the request timeout after the try began: a standby
        counts the duration from when it saw the write, which is later."""
        started = time.monotonic()
        try:
            held = await asyncio.wait_for(self._try_safely(), timeout=max(deadline, 0.001))
        except TimeoutError:
            log.warning(
                "renewing Lease %s/%s took longer than %.1fs", self._namespace, self._name, deadline
            )
            return False
        if held:
            self._valid_until = started + self._duration - self._margin
        return held

    async def _try_safely(self) -> bool:
        """One try; an API error (the server away, or its authorizer still warming up after a
        restart: 403) is logged and counts as not holding it."""
        try:
            return await asyncio.to_thread(self._try)
        except Exception as exc:
            log.warning(
                "cannot read or write Lease %s/%s: %s", self._namespace, self._name, _short(exc)
            )
            return False

    async def keep(self, stop: asyncio.Event) -> None:
        """Renew until stopped; set ``stop`` (and ``lost``) once the leadership ran out unrenewed.
        Each try may take only until the leadership runs out, so a renewal that hangs on a silent
        network cannot keep this process acting past it."""
        while not stop.is_set():
            await asyncio.sleep(min(self._renew, max(0.0, self._valid_until - time.monotonic())))
            if await self._renewed(self._valid_until - time.monotonic()):
                continue
            if not self.holding():
                log.error("lost Lease %s/%s: stopping", self._namespace, self._name)
                self.lost = True
                stop.set()

    async def release(self) -> None:
        """Give the Lease up (on a clean stop) so a successor need not wait for it to expire."""
        try:
            await asyncio.to_thread(self._release)
        except Exception as exc:
            log.warning("cannot release Lease: %s", exc)

    def _try(self) -> bool:
        try:
            lease = self._api.read_namespaced_lease(self._name, self._namespace)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            return self._create()
        spec = lease.spec
        version = lease.metadata.resource_version
        if version != self._seen[0]:
            self._seen = (version, time.monotonic())
        holder = spec.holder_identity
        expired = time.monotonic() - self._seen[1] > (spec.lease_duration_seconds or self._duration)
        if holder not in (None, "", self._identity) and not expired:
            return False
        now = _now()
        if holder != self._identity:
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.holder_identity, spec.renew_time = self._identity, now
        spec.lease_duration_seconds = int(self._duration)
        return self._replace(lease)

    def _create(self) -> bool:
        now = _now()
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=self._name, namespace=self._namespace),
            spec=client.V1LeaseSpec(
                holder_identity=self._identity,
                lease_duration_seconds=int(self._duration),
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            ),
        )
        try:
            self._api.create_namespaced_lease(self._namespace, body)
        except client.ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def _replace(self, lease: Any) -> bool:
        try:
            updated = self._api.replace_namespaced_lease(self._name, self._namespace, lease)
        except client.ApiException as exc:
            if exc.status == 409:  # someone else wrote it since we read it
                return False
            raise
        self._seen = (updated.metadata.resource_version, time.monotonic())
        return True

    def _release(self) -> None:
        lease = self._api.read_namespaced_lease(self._name, self._namespace)
        if lease.spec.holder_identity == self._identity:
            lease.spec.holder_identity = None
            self._replace(lease)


def _short(exc: BaseException) -> str:
    if isinstance(exc, client.ApiException):
        return f"HTTP {exc.status} {exc.reason}"
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
