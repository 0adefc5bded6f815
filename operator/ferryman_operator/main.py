"""``ferryman operator``: wait for the Lease, then run kopf with our handlers until stopped
(SIGTERM) or until the Lease is lost (exit 1: the pod restarts and queues for the Lease again).

While it waits for the Lease a standby serves ``/healthz`` itself, so a standby replica is alive
to its probes; once leading, kopf's liveness endpoint takes the port over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import kopf
from aiohttp import web

from ferryman_operator import handlers
from ferryman_operator.database import Database
from ferryman_operator.errors import SettingsError
from ferryman_operator.kube import Kube, api_client
from ferryman_operator.leader import Lease
from ferryman_operator.runs import Runs
from ferryman_operator.settings import OperatorSettings
from ferryman_operator.workers import Workers

log = logging.getLogger("ferryman.operator")


def run(settings: OperatorSettings) -> int:
    if settings.database_url is None:
        raise SettingsError(
            "FERRYMAN_DATABASE_URL is unset: the operator admits runs into the workers' "
            "database; set it (the chart reads it from the database Secret)"
        )
    return asyncio.run(_main(settings, settings.database_url.get_secret_value()))


async def _main(settings: OperatorSettings, url: str) -> int:
    kube = Kube(api_client())
    lease = Lease(kube, settings)
    async with _standby_health(settings.liveness_port):
        await lease.acquire()
    db = Database(url, settings.db_connections)
    workers = Workers(db, kube, settings.default_lane_width)
    registry = handlers.build(settings, Runs(db, kube, workers))
    stop = asyncio.Event()
    keeper = asyncio.create_task(lease.keep(stop))
    pool_namespace = settings.pool_namespace or settings.lease_namespace
    sizing = asyncio.create_task(workers.watch(pool_namespace, settings.pool_interval))
    try:
        await kopf.operator(
            registry=registry,
            standalone=True,
            clusterwide=not settings.namespaces,
            namespaces=settings.namespaces,
            liveness_endpoint=(
                f"http://0.0.0.0:{settings.liveness_port}/healthz"
                if settings.liveness_port
                else None
            ),
            stop_flag=stop,
        )
    finally:
        keeper.cancel()
        sizing.cancel()
        db.close()
        if not lease.lost:
            await lease.release()
    return 1 if lease.lost else 0


@contextlib.asynccontextmanager
async def _standby_health(port: int | None) -> AsyncIterator[None]:
    if port is None:
        yield
        return

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"standby": "waiting for the Lease"})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port, reuse_address=True).start()
    try:
        yield
    finally:
        await runner.cleanup()
