"""The operator's Prometheus metrics: one ``OperatorMetrics`` per process, its own registry, the
thin hooks the handlers, ``runs`` and ``workers`` call, and ``serve`` for ``GET /metrics``.

Nothing here reads the database or the API server: runs by state and the queued runs' ages are
counted at scrape time from the kopf index the handlers already keep of every MigrationRun (the
states as the API server stores them, updated by the watch, a deleted run gone with it);
admissions and refusals are counted from the status transitions ``runs`` computes anyway; the
sizing gauges are the verdicts ``workers`` reaches. Labels are bounded (``docs/decisions.md``):

- ``namespace`` and ``state``: namespaces with at least one MigrationRun, times the six states;
- ``workspace``: workspaces with a queued run now (the series goes with its last queued run);
- ``reason``: a fixed list of refusal reasons, anything else ``Other``;
- ``handler`` and ``error``: the handler ids and ``database``, ``api``, ``unexpected``;
- ``pool`` (with ``namespace``) and ``lane``: the pool specs found, and their lanes.

Every hook runs on the operator's event loop, as scrapes do: no locks (but the statement
counter, incremented on the database threads: prometheus_client's counters lock). Never a
secret in a label.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, Final

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric

from ferryman_operator.errors import DatabaseUnavailable, SettingsError
from ferryman_operator.reconcile import conditions as cond
from ferryman_operator.reconcile.admission import Candidate
from ferryman_operator.reconcile.pool import Sizing
from ferryman_worker.contract import RunState

log = logging.getLogger("ferryman.operator.metrics")

STATES: Final = tuple(state.value for state in RunState)
REFUSALS: Final = (
    *("WorkspaceBusy", "WorkspaceOwned", "InvalidSpec", "AdmissionFailed", "SourceNotAllowed"),
    *("ProviderNotFound", "ProviderInvalid", "ProviderUnreadable", "KindsInvalid"),
    *("MappingNotFound", "MappingInvalid", "MappingUnreadable"),
    *("CredentialMissing", "CredentialUnreadable", "CredentialNotBound", "CredentialForbidden"),
)
"""Every reason the operator refuses a run for, counted by name (a test checks that every
``Refusal`` the operator makes is one); any other reason is counted as ``Other``."""
ERRORS: Final = ("database", "api", "unexpected")


class OperatorMetrics:
    """The metric objects of one operator process, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.runs = RunsCollector()
        self.registry.register(self.runs)
        self.leader = Gauge(
            "ferryman_operator_leader",
            "1 while this process holds the Lease and acts; 0 while it stands by (its run "
            "series are then empty: only the leader observes runs).",
            registry=self.registry,
        )
        self.admissions = Counter(
            "ferryman_operator_admissions",
            "MigrationRuns this process admitted into the database (a refused run admitted on "
            "retry counts again).",
            registry=self.registry,
        )
        self.refusals = Counter(
            "ferryman_operator_refusals",
            "MigrationRuns refused admission, by the reason of their Admitted condition "
            "(WorkspaceBusy: conflictPolicy Reject; Provider*, Mapping*, Credential*, "
            "SourceNotAllowed, WorkspaceOwned, InvalidSpec, AdmissionFailed), Other for any "
            "other.",
            ["reason"],
            registry=self.registry,
        )
        self.errors = Counter(
            "ferryman_operator_reconcile_errors",
            "Reconciles that failed, by kopf handler (or pool) and error: database (PostgreSQL "
            "unreachable), api (the Kubernetes API), unexpected.",
            ["handler", "error"],
            registry=self.registry,
        )
        self.refreshes = Counter(
            "ferryman_operator_refreshes",
            "Refreshes of every live run (one every status interval while leading).",
            registry=self.registry,
        )
        self.statements = Counter(
            "ferryman_operator_database_statements",
            "Statements this process sent to PostgreSQL (counted on the database threads).",
            registry=self.registry,
        )
        self.sizing = SizingGauges(self.registry)
        for reason in (*REFUSALS, "Other"):
            self.refusals.labels(reason)

    # -- the hooks ---------------------------------------------------------------------------

    def leading(self, leads: bool) -> None:
        """The Lease was won (True) or lost (False): a standby shows no runs."""
        self.leader.set(1 if leads else 0)
        if not leads:
            self.runs.follow(None)

    def status_changed(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        """Count an admission or a refusal, once, on the transition that makes it."""
        change = transition(old, new)
        if change == "admitted":
            self.admissions.inc()
        elif change is not None:
            self.refusals.labels(change).inc()

    def reconcile_error(self, handler: str, exc: BaseException | str) -> None:
        self.errors.labels(handler, error_kind(exc)).inc()

    @contextlib.contextmanager
    def handling(self, handler: str) -> Iterator[None]:
        """Count what escapes a handler (kopf retries it), and let it escape."""
        try:
            yield
        except Exception as exc:
            self.reconcile_error(handler, exc)
            raise

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def transition(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """``admitted``, a refusal reason, or None: what the move from ``old`` to ``new`` says."""
    before = cond.find(old.get("conditions") or [], cond.ADMITTED) or {}
    after = cond.find(new.get("conditions") or [], cond.ADMITTED) or {}
    if after.get("status") == "True":
        return "admitted" if before.get("status") != "True" else None
    refused = new.get("state") == RunState.FAILED.value and after.get("status") == "False"
    was_refused = old.get("state") == RunState.FAILED.value and before.get("status") == "False"
    if not refused or was_refused:
        return None
    reason = str(after.get("reason"))
    return reason if reason in REFUSALS else "Other"


def error_kind(exc: BaseException | str) -> str:
    """``database``, ``api`` or ``unexpected`` (a string is a database error's message)."""
    if isinstance(exc, str | DatabaseUnavailable):
        return "database"
    module = type(exc).__module__
    if module.startswith(("kubernetes.", "kopf.", "aiohttp", "urllib3")):
        return "api"
    return "unexpected"


class RunsCollector:
    """``ferryman_operator_runs`` and ``ferryman_operator_queued_oldest_seconds``, counted at
    scrape time from kopf's index of every MigrationRun by workspace (``handlers.runs``)."""

    def __init__(self) -> None:
        self._index: Mapping[str, Iterable[Candidate]] | None = None

    def follow(self, index: Mapping[str, Iterable[Candidate]] | None) -> None:
        """Count from ``index`` (a live view kopf keeps current), or from nothing."""
        self._index = index

    def collect(self) -> Iterator[Metric]:
        runs = [run for store in (self._index or {}).values() for run in store]
        yield _runs_by_state(runs)
        yield _oldest_queued(runs, datetime.datetime.now(datetime.UTC))


def _runs_by_state(runs: list[Candidate]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "ferryman_operator_runs",
        "MigrationRuns by namespace and status.state (a run without a status yet is Pending); "
        "a namespace's series exist while it has a MigrationRun.",
        labels=["namespace", "state"],
    )
    counts: dict[str, dict[str, int]] = {}
    for run in runs:
        states = counts.setdefault(run.key.split("/", 1)[0], dict.fromkeys(STATES, 0))
        state = run.state or RunState.PENDING.value
        states[state] = states.get(state, 0) + 1
    for namespace, states in sorted(counts.items()):
        for state, count in states.items():
            family.add_metric([namespace, state], count)
    return family


def _oldest_queued(runs: list[Candidate], now: datetime.datetime) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "ferryman_operator_queued_oldest_seconds",
        "Seconds since the oldest Queued MigrationRun of a workspace was created; no series for "
        "a workspace without a queued run.",
        labels=["workspace"],
    )
    oldest: dict[str, str] = {}
    for run in runs:
        if run.state == RunState.QUEUED.value and run.created:
            oldest[run.workspace] = min(oldest.get(run.workspace, run.created), run.created)
    for workspace, created in sorted(oldest.items()):
        at = datetime.datetime.fromisoformat(created.replace("Z", "+00:00"))
        family.add_metric([workspace], max(0.0, (now - at).total_seconds()))
    return family


class SizingGauges:
    """The last sizing verdict per pool spec (``namespace``, ``pool``: the spec's fullname)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def gauge(name: str, what: str, *labels: str) -> Gauge:
            return Gauge(name, what, ["namespace", "pool", *labels], registry=registry)

        self.replicas = gauge(
            "ferryman_operator_sizing_replicas", "Worker replicas the pool spec asks for."
        )
        self.lane_threads = gauge(
            "ferryman_operator_sizing_lane_threads",
            "Threads per worker of each lane of the pool spec.",
            "lane",
        )
        self.pool_size = gauge(
            "ferryman_operator_sizing_pool_size",
            "Database connections per worker (the pool spec's poolSize, or the lanes' threads + "
            "the worker's own).",
        )
        self.fits = gauge(
            "ferryman_operator_sizing_fits",
            "1 when the pool spec fits the database's connection budget (the worker Deployment "
            "is sized from it), 0 when it does not or is invalid.",
        )
        self._lanes: dict[tuple[str, str], list[str]] = {}

    def set(self, namespace: str, pool: str, sizing: Sizing) -> None:
        self.forget(namespace, pool)
        self.fits.labels(namespace, pool).set(1 if sizing.fits else 0)
        if sizing.spec is None:
            return
        self.replicas.labels(namespace, pool).set(sizing.spec.replicas)
        if sizing.pool_size is not None:
            self.pool_size.labels(namespace, pool).set(sizing.pool_size)
        lanes = _lanes(sizing.spec.lanes)
        for lane, threads in lanes.items():
            self.lane_threads.labels(namespace, pool, lane).set(threads)
        self._lanes[namespace, pool] = list(lanes)

    def forget(self, namespace: str, pool: str) -> None:
        for gauge in (self.replicas, self.pool_size, self.fits):
            with contextlib.suppress(KeyError):
                gauge.remove(namespace, pool)
        for lane in self._lanes.pop((namespace, pool), []):
            with contextlib.suppress(KeyError):
                self.lane_threads.remove(namespace, pool, lane)


def _lanes(text: str) -> dict[str, int]:
    lanes: dict[str, int] = {}
    for part in text.split(","):
        name, _, width = part.strip().partition(":")
        with contextlib.suppress(ValueError):
            lanes[name] = int(width)
    return lanes


@contextlib.asynccontextmanager
async def serve(port: int, metrics: OperatorMetrics) -> AsyncIterator[None]:
    """``GET /metrics`` on ``port`` (every address) while inside; 0: nothing served."""
    if not port:
        yield
        return

    async def exposition(_: web.Request) -> web.Response:
        return web.Response(
            body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/metrics", exposition)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "0.0.0.0", port, reuse_address=True).start()
    except OSError as exc:
        await runner.cleanup()
        raise SettingsError(
            f"metrics_port (FERRYMAN_OPERATOR_METRICS_PORT, --metrics-port): cannot listen on "
            f"port {port} ({exc.strerror}); pick a free port, or 0 to turn it off"
        ) from None
    log.info("metrics on port %d: GET /metrics", port)
    try:
        yield
    finally:
        await runner.cleanup()
