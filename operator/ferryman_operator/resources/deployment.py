"""The worker Deployment, sized from its pool spec's verdict (``reconcile.pool``): every
Deployment labelled for the pool spec gets ``FERRYMAN_LANES``, ``FERRYMAN_POOL_SIZE``,
``spec.replicas`` and the pod template's hash annotation (which rolls the pods), each only where
it differs, and a Normal Event ``PoolSpecApplied``; a verdict that does not fit changes nothing
and gets a Warning Event, once per message."""

from __future__ import annotations

import logging

from ferryman_operator.kube import Kube
from ferryman_operator.reconcile import pool

log = logging.getLogger("ferryman.operator.workers")


class Deployments:
    """Writes the sizing into the worker Deployments; remembers the Warning said of each pool
    spec, by ``namespace/fullname``, so an unchanged verdict is not said again."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube
        self._warned: dict[str, str] = {}

    async def size(self, namespace: str, fullname: str, sizing: pool.Sizing) -> None:
        """Size every Deployment of ``namespace`` labelled for the pool spec ``fullname``."""
        key = f"{namespace}/{fullname}"
        found = await self._kube.deployments(namespace, f"{pool.WORKERS_LABEL}={fullname}")
        for deployment in found:
            await self._apply(key, deployment, sizing)

    async def _apply(self, key: str, deployment: dict[str, object], sizing: pool.Sizing) -> None:
        meta = deployment["metadata"]
        assert isinstance(meta, dict)
        if not sizing.fits:
            if self._warned.get(key) != sizing.message:
                self._warned[key] = sizing.message
                log.warning("pool spec %s: %s", key, sizing.message)
                await self._kube.post_event(deployment, "Warning", sizing.reason, sizing.message)
            return
        self._warned.pop(key, None)
        patch = pool.deployment_patch(deployment, sizing)
        if patch is None:
            return
        await self._kube.patch_deployment(meta["namespace"], meta["name"], patch)
        log.info("pool spec %s: Deployment %s resized: %s", key, meta["name"], sizing.message)
        await self._kube.post_event(deployment, "Normal", "PoolSpecApplied", sizing.message)
