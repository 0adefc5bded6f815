"""``ferryman operator``: wait for the Lease, then run kopf with our handlers until stopped
(SIGTERM, exit 0). A leader that cannot renew the Lease in time (the API server away) stops
kopf and stands by for the Lease again, in the same process: no crash loop.

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

from ferryman_operator import handlers, metrics
from ferryman_operator.credentials import Credentials
from ferryman_operator.database import Database
from ferryman_operator.errors import SettingsError
from ferryman_operator.fleet import Fleet
from ferryman_operator.kube import Kube, api_client
from ferryman_operator.leader import Lease
from ferryman_operator.reconcile import allowlist
from ferryman_operator.runs import Runs
from ferryman_operator.settings import OperatorSettings
from ferryman_operator.workers import Workers

log = logging.getLogger("ferryman.operator")
STOP_TIMEOUT = 10.0
"""Seconds kopf gets to stop after the Lease was lost, before it is cancelled."""


def run(settings: OperatorSettings) -> int:
    if settings.database_url is None:
        raise SettingsError(
            "FERRYMAN_DATABASE_URL is unset: the operator admits runs into the workers' "
            "database; set it (the chart reads it from the database Secret)"
        )
    return asyncio.run(_main(settings, settings.database_url.get_secret_value()))


async def _main(settings: OperatorSettings, url: str) -> int:
    kube = Kube(api_client(settings.request_timeout))
    lease = Lease(kube, settings)
    kube.acting = lease.holding  # no write of ours once the leadership ran out
    seen = metrics.OperatorMetrics()
    db = Database(url, settings.db_connections, seen.statements.inc)
    workers = Workers(db, kube, settings.default_lane_width, seen)
    try:
        async with metrics.serve(settings.metrics_port, seen):
            while True:
                async with _standby_health(settings.liveness_port):
                    await lease.acquire()
                seen.leading(True)
                if not await _lead(settings, lease, kube, db, workers, seen):
                    return 0
                seen.leading(False)
                log.warning(
                    "lost the Lease (the API server unreachable?): standing by until it is ours "
                    "again"
                )
    finally:
        db.close()


async def _lead(
    settings: OperatorSettings,
    lease: Lease,
    kube: Kube,
    db: Database,
    workers: Workers,
    seen: metrics.OperatorMetrics,
) -> bool:
    """Run kopf while this process holds the Lease; True if it ended because the Lease was
    lost (then the caller stands by for it again), False on a clean stop (SIGTERM)."""
    lease.lost = False
    stop = asyncio.Event()
    credentials = Credentials(kube, settings.sealing_key_file, settings.protected_secrets)
    allowed = allowlist.parse(settings.allowed_source_urls)
    runs = Runs(db, kube, workers, seen, lease.holding, credentials, allowed, settings.destinations)
    fleet = Fleet(runs, settings.status_interval, seen)
    registry = handlers.build(settings, runs, seen, fleet)
    pool_namespace = settings.pool_namespace or settings.lease_namespace
    keeper = asyncio.create_task(lease.keep(stop))
    sizing = asyncio.create_task(workers.watch(pool_namespace, settings.pool_interval))
    refreshing = asyncio.create_task(fleet.run())
    operator = asyncio.create_task(
        kopf.operator(
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
    )
    try:
        await asyncio.wait({operator, keeper}, return_when=asyncio.FIRST_COMPLETED)
        if lease.lost:  # the leadership ran out: kopf stops now, not after its last writes
            operator.cancel()
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(operator, timeout=STOP_TIMEOUT)
        else:
            await operator
    finally:
        for task in (keeper, sizing, refreshing, operator):
            task.cancel()
        if not lease.lost:
            await lease.release()
    return lease.lost


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
