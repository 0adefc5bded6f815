"""Sizing the worker Deployment from its pool spec: observe (ConfigMap, the database's budget),
decide (``reconcile.pool``), have ``resources.deployment`` write only what differs into the
Deployment, and remember the verdict for the runs' WorkersReady condition and default in-flight
limit."""

from __future__ import annotations

import asyncio
import logging

from ferryman_operator.database import Database
from ferryman_operator.errors import DatabaseUnavailable, PoolSpecError
from ferryman_operator.kube import Kube, NotLeading
from ferryman_operator.metrics import OperatorMetrics
from ferryman_operator.reconcile import pool
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_operator.resources import deployment
from ferryman_worker import contract

log = logging.getLogger("ferryman.operator.workers")


class Workers:
    """The verdicts on every pool spec seen, by ``namespace/fullname``."""

    def __init__(
        self, db: Database, kube: Kube, default_width: int, metrics: OperatorMetrics
    ) -> None:
        self._db, self._kube = db, kube
        self._metrics = metrics
        self._default_width = default_width
        self.verdicts: dict[str, pool.Sizing] = {}
        self._deployments = deployment.Deployments(kube)

    def _verdict_for(self, namespace: str) -> pool.Sizing | None:
        ordered = sorted(self.verdicts.items())
        mine = [v for key, v in ordered if key.startswith(f"{namespace}/")]
        every = mine or [v for _, v in ordered]
        return every[0] if every else None

    def condition(self, namespace: str) -> Wanted:
        verdict = self._verdict_for(namespace)
        return pool.NO_POOL_SPEC if verdict is None else verdict.condition

    def lane_width(self, namespace: str) -> int:
        verdict = self._verdict_for(namespace)
        width = verdict.migrations_width if verdict is not None else None
        return width or self._default_width

    async def watch(self, namespace: str, interval: float) -> None:
        """Check every pool spec of ``namespace`` every ``interval`` seconds, forever."""
        while True:
            try:
                await self.check_all(namespace)
            except DatabaseUnavailable as exc:
                self._metrics.reconcile_error("pool", exc)
                log.warning("pool spec: cannot read the connection budget: %s", exc)
            except NotLeading as exc:  # the leadership ran out: this task is about to be cancelled
                log.info("pool spec: %s", exc)
            except Exception as exc:  # an API error: logged, tried again next round
                self._metrics.reconcile_error("pool", exc)
                log.exception("pool spec: check failed; trying again in %.0f s", interval)
            await asyncio.sleep(interval)

    async def check_all(self, namespace: str) -> None:
        maps = await self._kube.configmaps(namespace, pool.POOL_SPEC_LABEL)
        names = {m["metadata"]["labels"][pool.POOL_SPEC_LABEL] for m in maps}
        for key in [k for k in self.verdicts if k.startswith(f"{namespace}/")]:
            if key.split("/", 1)[1] not in names:
                del self.verdicts[key]
                namespace_of, name = key.split("/", 1)
                self._metrics.sizing.forget(namespace_of, name)
        for name in sorted(names):
            await self.sync(namespace, name)

    async def sync(self, namespace: str, fullname: str) -> None:
        """Check the pool spec ``fullname`` of ``namespace`` and size its Deployment."""
        key = f"{namespace}/{fullname}"
        maps = await self._kube.configmaps(namespace, f"{pool.POOL_SPEC_LABEL}={fullname}")
        if not maps:
            self.verdicts.pop(key, None)
            self._metrics.sizing.forget(namespace, fullname)
            return
        config = maps[0]
        try:
            spec = pool.parse(config.get("data"))
        except PoolSpecError as exc:
            name = config["metadata"]["name"]
            sizing = pool.missing("InvalidPoolSpec", f"ConfigMap {name}: {exc}")
        else:
            budget = await self._db.run(contract.connection_budget)
            sizing = pool.size(spec, budget)
        self.verdicts[key] = sizing
        self._metrics.sizing.set(namespace, fullname, sizing)
        await self._deployments.size(namespace, fullname, sizing)
