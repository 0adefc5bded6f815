"""What the operator (and ``ferryman run``) may use of the worker package: the MigrationRun
model, run admission, status aggregates, suspend, resume, cancel and retry, the database's
connection budget and the worker's pool rule. The operator reaches the database only through
this module; nothing here imports ``ferryman_operator``."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from ferryman_worker import eta as _eta
from ferryman_worker import providers as _providers
from ferryman_worker import settings, wording
from ferryman_worker.db import connect as _connect
from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.destination_policy import Policy as DestinationPolicy
from ferryman_worker.destination_policy import Schema as DestinationSchema
from ferryman_worker.destination_policy import Table as DestinationTable
from ferryman_worker.destinations import mapping as _mapping
from ferryman_worker.destinations.mapping import Mapping as MappingSpec
from ferryman_worker.engine import allowlist as _allowlist
from ferryman_worker.engine import auth as _auth
from ferryman_worker.engine import causes, reconcile, runs, verification
from ferryman_worker.engine.allowlist import Pattern as URLPattern
from ferryman_worker.engine.credentials import (
    HOSTS_ANNOTATION,
    Credential,
    Sealer,
    parse_hosts,
    url_host,
)
from ferryman_worker.engine.runs import AdmissionRefused, Sealed, WorkspaceOwned
from ferryman_worker.engine.schedule import LANE
from ferryman_worker.errors import ConfigurationError, DatabaseError, FerrymanError, MappingInvalid
from ferryman_worker.providers import declarative as _declarative
from ferryman_worker.providers.declarative.spec import ProviderSpecBody as ProviderSpec
from ferryman_worker.runspec import (
    KindVerification,
    MigrationRun,
    MigrationRunStatus,
    PhaseEta,
    RateLimitSpec,
    RunEta,
    RunMode,
    RunOptions,
    RunState,
    RunVerification,
    load_run,
    load_run_file,
    parse_run,
)

parse_url_patterns = _allowlist.parse
url_allowed = _allowlist.allowed

__all__ = [
    "CAUSES",
    "HOSTS_ANNOTATION",
    "OWN_CONNECTIONS",
    "AdmissionRefused",
    "ConfigurationError",
    "Connection",
    "ConnectionBudget",
    "Credential",
    "DatabaseError",
    "DestinationPolicy",
    "DestinationSchema",
    "DestinationTable",
    "FerrymanError",
    "KindCheck",
    "KindVerdict",
    "MappingInvalid",
    "MappingSpec",
    "MigrationRun",
    "MigrationRunStatus",
    "PhaseEta",
    "ProviderSpec",
    "Retrying",
    "RunEta",
    "RunProgress",
    "RunState",
    "RunVerification",
    "Sealed",
    "Sealer",
    "URLPattern",
    "Verification",
    "WorkspaceOwned",
    "admit",
    "cancel",
    "cause",
    "connect",
    "connection_budget",
    "credential_keys",
    "engine_options",
    "eta",
    "eta_status",
    "forget",
    "kinds_refused",
    "load_run",
    "load_run_file",
    "local_binding_refused",
    "mapping_document",
    "mapping_file_refused",
    "migrations_width",
    "parse_hosts",
    "parse_run",
    "parse_url_patterns",
    "progress",
    "provider_definition",
    "provider_installed",
    "request_for",
    "resume",
    "retry",
    "retrying",
    "run_key",
    "suspend",
    "token_url",
    "url_allowed",
    "url_host",
    "verification_status",
    "verify",
    "worker_lanes",
    "worker_pool_size",
]

OWN_CONNECTIONS = settings.OWN_CONNECTIONS
"""Connections a worker process holds besides its lane threads."""


def connect(url: str) -> Connection:
    """A connection (autocommit, rows as dicts); DatabaseError when PostgreSQL cannot be reached."""
    return _connect.connect(url)


def worker_pool_size(lanes: str, pool_size: int | None) -> int:
    """The pool size ``ferryman worker`` uses with these lanes: ``pool_size``, or the lanes'
    threads + OWN_CONNECTIONS when None; ConfigurationError, as the worker would refuse, when
    the lanes do not parse or ``pool_size`` is too small."""
    return settings.check_pool_size(lanes, pool_size)


def worker_lanes(lanes: str, pool_size: int | None) -> dict[str, int]:
    """Each lane's threads as ``ferryman worker`` runs them with these lanes and pool size (a
    lane written without a width shares what the pool leaves), in the order written;
    ConfigurationError, as the worker would refuse, when they cannot be resolved."""
    return {spec.name: spec.width for spec in settings.resolve_lanes(lanes, pool_size)}


def migrations_width(lanes: str, pool_size: int | None) -> int | None:
    """Threads of the lane migration tasks run in (``migrations``), resolved as the worker does,
    or None when the lanes have no such lane."""
    return worker_lanes(lanes, pool_size).get(LANE)


def run_key(run: MigrationRun) -> str:
    """The run's name in the database: ``namespace/name``."""
    return f"{run.metadata.namespace}/{run.metadata.name}"


def provider_installed(name: str) -> bool:
    """Whether a provider named ``name`` is installed (a built-in, or a plug-in's)."""
    try:
        _providers.load(name)
    except ConfigurationError:
        return False
    return True


def provider_definition(name: str, spec: object, source: str) -> dict[str, Any]:
    """The declarative provider whose spec is ``spec`` (a MigrationProvider's), named ``name``,
    as a run snapshots it; ConfigurationError, one line per problem naming its field, when the
    model refuses it (``source`` names the resource in the message)."""
    document = {"metadata": {"name": name}, "spec": spec}
    return _declarative.DeclaredProvider(_declarative.check(document, source)).definition()


def token_url(run: MigrationRun, provider_definition: dict[str, Any] | None) -> str | None:
    """The second URL the run's provider sends its credential to: its OAuth2 token URL (a path
    resolved on the run's baseURL), or None when its auth style has none or the provider cannot
    be loaded (admission says why). ``provider_definition``: the declarative provider to
    snapshot (None: the built-in of the run's ``spec.source.provider``)."""
    style = _auth_style(run, provider_definition)
    if style is None or style.oauth2 is None:
        return None
    return _auth.token_url(style.oauth2, run.spec.source.base_url)


def credential_keys(
    run: MigrationRun, provider_definition: dict[str, Any] | None
) -> tuple[str, ...]:
    """The keys of the run's Secret its provider's auth reads besides the one
    ``credentialsSecretRef.key`` names (basic: username and password; oauth2: its grant's
    keys); () when the provider cannot be loaded (admission says why)."""
    style = _auth_style(run, provider_definition)
    return () if style is None else tuple(k for k in _auth.needs(style) if k != "token")


def _auth_style(
    run: MigrationRun, provider_definition: dict[str, Any] | None
) -> _providers.AuthStyle | None:
    """The auth style of the run's provider; None when the provider cannot be loaded."""
    try:
        return _providers.resolve(run.spec.source.provider, provider_definition).auth
    except ConfigurationError:
        return None


def kinds_refused(run: MigrationRun, provider_definition: dict[str, Any] | None) -> str | None:
    """Why admission would refuse the run's ``spec.kinds`` (a kind its provider does not have, a
    tree kind without its parent), or None when they fit or the provider cannot be loaded
    (admission says why). ``provider_definition``: the declarative provider to snapshot (None:
    the built-in of the run's ``spec.source.provider``)."""
    try:
        provider = _providers.resolve(run.spec.source.provider, provider_definition)
    except ConfigurationError:
        return None
    try:
        _providers.phases_for(provider, list(run.spec.kinds))
    except ConfigurationError as exc:
        return str(exc)
    return None


def local_binding_refused(run: MigrationRun) -> str | None:
    """Why the operator refuses a run that binds its credential itself (None: it does not)."""
    host = run.spec.source.credentials_secret_ref.token_host
    if host is None:
        return None
    return (
        f"spec.source.credentialsSecretRef.tokenHost: {host!r} is read by `ferryman run` only;"
        f" on Kubernetes the Secret binds its credential: add {host} to its {HOSTS_ANNOTATION}"
        " annotation (with the baseURL's host) and remove tokenHost from the run"
    )


def mapping_document(spec: object, source: str) -> dict[str, Any]:
    """The mapping whose document is ``spec`` (a MigrationMapping's), as a run is given it;
    MappingInvalid, one line per problem naming its field, when the model refuses it."""
    return _mapping.dump(_mapping.parse(spec, source=source))


def request_for(
    run: MigrationRun,
    lane_width: int,
    mapping: dict[str, Any] | None = None,
    sealed: Sealed | None = None,
    provider_definition: dict[str, Any] | None = None,
    destinations: DestinationPolicy | None = None,
) -> runs.RunRequest:
    """The admission request for a MigrationRun; the lane width sets the default in-flight;
    ``mapping`` is the document ``spec.mapping`` names (read by the caller). With ``sealed``
    (the operator's admission) the run belongs to its namespace: its workspace must be the
    namespace's, and its workers use only that credential. ``provider_definition``: a
    declarative provider to snapshot into the run. ``destinations``: where the installation
    lets mappings write (default: its defaults, the ``public`` schema, workspace columns)."""
    spec, source = run.spec, run.spec.source
    options = spec.options
    if spec.mapping is not None and mapping is None:
        raise ConfigurationError(
            mapping_file_refused(spec.mapping.file)
            if spec.mapping.file is not None
            else f"spec.mapping.name: MigrationMapping {spec.mapping.name!r} was not read: the "
            "operator reads it at admission; `ferryman run` reads spec.mapping.file"
        )
    namespace = run.metadata.namespace if sealed is not None else None
    return runs.RunRequest(
        name=run_key(run),
        workspace=spec.workspace,
        provider=source.provider,
        base_url=source.base_url,
        credential={
            "name": source.credentials_secret_ref.name,
            "key": source.credentials_secret_ref.key,
            **({"namespace": namespace} if namespace else {}),
            # ferryman run's binding to a login host (the operator refuses it)
            **(
                {"tokenHost": source.credentials_secret_ref.token_host}
                if source.credentials_secret_ref.token_host and not namespace
                else {}
            ),
        },
        kinds=list(spec.kinds),
        options={
            **engine_options(options, spec.effective_max_in_flight(lane_width), source.rate_limit),
            "error_budget": spec.error_budget.model_dump(),
        },
        mapping=mapping,
        namespace=namespace,
        sealed=sealed,
        provider_definition=provider_definition,
        source_options=dict(source.options),
        mode="delta" if spec.mode is RunMode.DELTA else "full",
        destinations=destinations or DestinationPolicy(),
    )


def mapping_file_refused(file: str) -> str:
    """Why the operator refuses ``spec.mapping.file``, and what to use instead."""
    return (
        f"spec.mapping.file: {file!r} is read by `ferryman run` only; on Kubernetes create the "
        "mapping as a MigrationMapping in the run's namespace (`kubectl apply` of a document "
        "with kind MigrationMapping and the mapping as its spec) and name it in "
        "spec.mapping.name instead"
    )


def engine_options(
    options: RunOptions, max_in_flight: int, rate: RateLimitSpec | None = None
) -> dict[str, Any]:
    """The run's options as the engine keeps them (``ferryman_runs.options``)."""
    return {
        "stripes": options.stripes,
        "page_size": options.page_size,
        "window_size": options.window_size,
        "max_in_flight": max_in_flight,
        "fetch_threads": options.fetch_threads,
        "parents_per_task": options.parents_per_task,
        "rate_limit": None
        if rate is None
        else {"tokens_per_second": rate.tokens_per_second, "burst": rate.burst},
    }


def admit(
    conn: Connection,
    run: MigrationRun,
    lane_width: int,
    mapping: dict[str, Any] | None = None,
    sealed: Sealed | None = None,
    provider_definition: dict[str, Any] | None = None,
    destinations: DestinationPolicy | None = None,
) -> int:
    """Admit and start the run (or find it, if it was admitted before, and start it if the
    process that admitted it died before it was started); returns its id. ``sealed``: the
    run's credential, sealed by the operator from the Secret in the run's namespace; a
    declarative ``provider_definition`` is snapshotted into the run.

    AdmissionRefused when another run of the workspace is live: the database decides;
    WorkspaceOwned when another namespace owns the workspace."""
    existing = runs.by_name(conn, run_key(run))
    if existing is not None:
        if (
            existing["state"] == "running"
            and not runs.progress(conn, existing["id"])[0]["tasks_total"]
        ):
            runs.start(conn, existing)  # admitted, then the admitting process died: finish it
        return int(existing["id"])
    request = request_for(run, lane_width, mapping, sealed, provider_definition, destinations)
    row = runs.admit(conn, request)
    runs.start(conn, row)
    if run.spec.suspend:
        runs.suspend(conn, int(row["id"]))
    return int(row["id"])


KindVerdict = reconcile.Verdict
"""A kind's verdict, given when its phase closed: ``reconciled`` (what it listed adds up to the
total its source states), ``unverified`` (the source states none), ``short`` (it listed fewer)
or ``refused`` (more of its records were refused than the error budget allows)."""


Verification = verification.Verification
"""A run's verification: its source's ids listed again and compared with the ledger; its
``verdict`` is ``verified``, ``differs``, ``pending`` or ``failed``, each of its ``kinds`` a
``KindCheck`` (listed, missing, gone, the first ids of each)."""
KindCheck = verification.KindCheck
"""One kind of a verification: ids listed, missing, gone, the first ids of each."""


@dataclasses.dataclass(frozen=True)
class RunProgress:
    """One run's aggregate, as ``.status`` and ``ferryman status`` show it."""

    id: int
    name: str
    workspace: str
    state: RunState
    suspended: bool
    phase: str | None
    phase_index: int
    phases: int
    tasks_done: int
    tasks_total: int
    tasks_running: int
    tasks_failed: int
    rows_written: int
    rows_skipped: int
    rows_failed: int
    started_at: datetime.datetime
    finished_at: datetime.datetime | None
    error: str | None
    phase_names: tuple[str, ...] = ()
    """Every phase of the run in order, named as ``phase`` names the open one."""
    verdicts: tuple[KindVerdict, ...] = ()
    """The verdict of each kind whose phase closed, in phase order, with the run's finished
    verification applied (``verified``, or ``short`` by its missing ids)."""
    rows_matched: int = 0
    """Records matched by their kind's natural key to rows the application already had (their
    ledger slots name those rows; not written)."""
    verification: Verification | None = None
    """Its latest verification (``ferryman verify``, the ``ferryman.dev/verify`` annotation):
    where it stands, the run's verdict and each kind's missing and gone ids; None: none was
    asked for."""

    def status(self) -> MigrationRunStatus:
        return MigrationRunStatus(
            state=self.state,
            phase=self.phase,
            tasks_done=self.tasks_done,
            tasks_total=self.tasks_total,
            rows_written=self.rows_written,
            rows_skipped=self.rows_skipped,
            rows_matched=self.rows_matched,
            rows_failed=self.rows_failed,
            started_at=self.started_at,
            finished_at=self.finished_at,
        )


_STATES = {
    "running": RunState.RUNNING,
    "succeeded": RunState.SUCCEEDED,
    "failed": RunState.FAILED,
    "cancelled": RunState.CANCELLED,
}


def progress(conn: Connection, name: str | None = None) -> list[RunProgress]:
    """Aggregates of every run, or of the run called ``name`` (``namespace/name``)."""
    run_id = None
    if name is not None:
        row = runs.by_name(conn, name)
        if row is None:
            return []
        run_id = int(row["id"])
    return [_progress(row) for row in runs.progress(conn, run_id)]


def _progress(row: dict[str, Any]) -> RunProgress:
    phases: list[list[str]] = row["phases"]
    index = int(row["phase"])
    names = tuple("+".join(kinds) for kinds in phases)
    phase = names[index] if index < len(names) and row["state"] == "running" else None
    verified = Verification.of(row.get("verification"))
    return RunProgress(
        id=int(row["id"]),
        name=row["name"],
        workspace=row["workspace"],
        state=_STATES[row["state"]],
        suspended=bool(row["suspended"]),
        phase=phase,
        phase_index=index,
        phases=len(phases),
        tasks_done=int(row["tasks_done"]),
        tasks_total=int(row["tasks_total"]),
        tasks_running=int(row["tasks_running"]),
        tasks_failed=int(row["tasks_failed"]),
        rows_written=int(row["rows_written"]),
        rows_skipped=int(row["rows_skipped"]),
        rows_matched=int(row["rows_matched"]),
        rows_failed=int(row["rows_failed"]),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        error=row["error"],
        phase_names=names,
        verdicts=verification.judged(
            [KindVerdict(**found) for found in row.get("verdicts") or ()], verified
        ),
        verification=verified,
    )


def verify(conn: Connection, name: str, request: str) -> None:
    """Ask for the finished run ``name``'s verification (``request``: who asks, e.g. the
    annotation's value); a worker's verification job does it. FerrymanError while it runs."""
    verification.request(conn, _id(conn, name), request)


_VERDICTS = {"verified": "Verified", "differs": "Differs", "pending": "Pending", "failed": "Failed"}


def verification_status(found: Verification) -> RunVerification:
    """``.status.verification`` from a run's verification (``RunProgress.verification``)."""
    return RunVerification(
        request=found.request[:1024],
        verdict=_VERDICTS[found.verdict],  # type: ignore[arg-type]
        message=found.line()[:4096],
        finished_at=found.finished_at,
        kinds=[
            KindVerification(
                kind=kind.kind,
                verdict=_VERDICTS[kind.verdict],  # type: ignore[arg-type]
                listed=kind.listed,
                missing=kind.missing,
                gone=kind.gone,
                missing_ids=[i[:256] for i in kind.missing_ids],
                gone_ids=[i[:256] for i in kind.gone_ids],
            )
            for kind in found.kinds[:64]
        ],
    )


def _id(conn: Connection, name: str) -> int:
    row = runs.by_name(conn, name)
    if row is None:
        raise LookupError(f"no run named {name!r} in this database")
    return int(row["id"])


def suspend(conn: Connection, name: str) -> bool:
    return runs.suspend(conn, _id(conn, name))


def resume(conn: Connection, name: str) -> list[int]:
    return runs.resume(conn, _id(conn, name))


def cancel(conn: Connection, name: str) -> bool:
    return runs.cancel(conn, _id(conn, name))


def forget(conn: Connection, name: str) -> str | None:
    """The MigrationRun ``name`` was deleted: its finished run becomes ``name@id`` (returned),
    so a new MigrationRun of that name is admitted as a new run. A live run keeps its name."""
    return runs.forget_name(conn, name)


def retry(conn: Connection, name: str, sealed: Sealed | None = None) -> int:
    """Reopen the failed run ``name`` from its checkpoints (with ``sealed``, its credential
    sealed again from the Secret as it is now); returns how many tasks were queued again.
    AdmissionRefused if its workspace has another live run, FerrymanError if it did not
    fail."""
    return runs.retry(conn, _id(conn, name), sealed)


@dataclasses.dataclass(frozen=True)
class Retrying:
    """A running run's tasks that wait to try again: the "retrying N task(s) …" line ``ferryman
    status`` shows, and the cause their latest failure names (``CredentialUnavailable``,
    ``SourceRefused``, ``TableMissing``, ...; None: one trying again may mend)."""

    line: str
    cause: str | None = None


def retrying(conn: Connection, run_id: int, now: datetime.datetime) -> Retrying | None:
    """What ``ferryman status`` shows of a running run's retried tasks, or None."""
    row = runs.retrying(conn, run_id)
    return None if row is None else _retrying(row, now)


def _retrying(row: dict[str, Any], now: datetime.datetime) -> Retrying:
    return Retrying(causes.retrying_line(row, now).strip(), causes.named(row.get("last_error")))


CAUSES = frozenset(causes.WHAT)
"""The causes a run names for a task that keeps failing (a condition's reason)."""


def cause(error: str | None) -> str | None:
    """The cause a failed run's ``error`` names (``causes.named``), or None."""
    return causes.named(error)


def eta(conn: Connection, run_id: int) -> RunEta | None:
    """The running run's ETA for ``.status.eta`` (None: it does not run, or is suspended)."""
    found = _eta.read(conn, run_id, runs.kind_progress(conn, run_id))
    return None if found is None else eta_status(found)


@dataclasses.dataclass(frozen=True)
class LiveRun:
    """What a refresh shows of one run: its aggregate, and while it runs the "retrying …" line
    and its ETA."""

    progress: RunProgress
    retrying: Retrying | None = None
    eta: RunEta | None = None


def live_progress(conn: Connection, names: list[str], now: datetime.datetime) -> dict[str, LiveRun]:
    """``progress``, ``retrying`` and ``eta`` of every run named in ``names`` (``namespace/name``;
    a name with no run is left out) in at most four statements, however many runs are named."""
    rows = runs.live_progress(conn, names) if names else []
    moving = [int(row["id"]) for row in rows if _eta.running(row)]
    failing = runs.retrying_of(conn, moving) if moving else {}
    active: dict[int, list[dict[str, Any]]] = {run_id: [] for run_id in moving}
    for kind in runs.kind_progress_of(conn, moving) if moving else []:
        active[int(kind["run_id"])].append(kind)
    work = _eta.open_work(conn, moving) if moving else {}
    found = {}
    for row in rows:
        run_id = int(row["id"])
        failed = failing.get(run_id)
        found[str(row["name"])] = LiveRun(
            _progress(row),
            None if failed is None else _retrying(failed, now),
            eta_status(_eta.of_run(row, active[run_id], work[run_id]))
            if run_id in active
            else None,
        )
    return found


def eta_status(found: _eta.Estimate) -> RunEta:
    """``.status.eta`` from an estimate (``eta.read``)."""
    seconds = int(found.seconds)
    if found.complete:
        remaining = wording.duration(seconds)
    else:
        remaining = f">= {wording.duration(seconds)}" if seconds else "unknown"
    phases = [
        PhaseEta(
            phase="+".join(part.kinds),
            message=line[:4096],
            **_eta_figures(part.seconds, part.complete, part.bound),
        )
        for part, line in zip(found.parts, _eta.phase_lines(found), strict=True)
    ]
    return RunEta(
        remaining=remaining,
        message=_eta.run_line(found)[:4096],
        phases=phases[:64],
        **_eta_figures(found.seconds, found.complete, found.bound),
    )


def _eta_figures(seconds: float, complete: bool, bound: str) -> dict[str, Any]:
    return {
        "seconds": int(seconds) if complete else None,
        "at_least_seconds": int(seconds),
        "bound_by": "RateLimit" if bound == _eta.RATE_LIMIT else "Pace",
    }


@dataclasses.dataclass(frozen=True)
class ConnectionBudget:
    """What the database allows: ``max_connections`` and the connections it reserves."""

    max_connections: int
    superuser_reserved: int
    reserved: int

    @property
    def available(self) -> int:
        """Connections ordinary roles may open."""
        return self.max_connections - self.superuser_reserved - self.reserved


def connection_budget(conn: Connection) -> ConnectionBudget:
    """``SHOW max_connections``, ``superuser_reserved_connections`` and (PostgreSQL 16+)
    ``reserved_connections``, read from the database itself."""
    row = conn.execute(queries.get("connection_budget")).fetchone()
    assert row is not None
    return ConnectionBudget(
        int(row["max_connections"]), int(row["superuser_reserved"]), int(row["reserved"])
    )
