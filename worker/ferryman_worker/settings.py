"""The worker's configuration: one model, read once from the environment (prefix ``FERRYMAN_``)
and overridden by command-line flags in ``cli``. Nothing reads the environment anywhere else.

The database URL is a ``SecretStr``: it is never printed, logged or put into an exception.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ferryman_worker import destination_policy as policy
from ferryman_worker import lanespec
from ferryman_worker.errors import ConfigurationError

OWN_CONNECTIONS = 4
"""Connections a worker process holds besides its lane threads:
notifier, poller, cron, heartbeat."""


def resolve_lanes(lanes: str, pool_size: int | None) -> list[lanespec.LaneSpec]:
    """The lanes as ``ferryman worker`` runs them, each with its threads. A lane written without
    a width (``name`` instead of ``name:threads``) takes an equal share of the threads the pool
    leaves: ``pool_size`` - OWN_CONNECTIONS - the widths given; the remainder goes one thread
    each to the first such lanes, in the order written. ConfigurationError (naming the setting
    and the fix) when the lanes do not parse, or there are such lanes and no ``pool_size``, or
    it leaves them fewer than 1 thread each."""
    requests = lanespec.read_lanes(lanes)
    open_lanes = [r.name for r in requests if r.width is None]
    if not open_lanes:
        return lanespec.share(requests, 0)
    given = sum(r.width or 0 for r in requests)
    names = ", ".join(repr(name) for name in open_lanes)
    least = given + OWN_CONNECTIONS + len(open_lanes)
    if pool_size is None:
        raise ConfigurationError(
            f"lanes {lanes!r} give lane(s) {names} no thread count, so their threads come from "
            f"the pool size, and none is set: set FERRYMAN_POOL_SIZE (--pool-size) to at least "
            f"{least}, or give each lane its threads (e.g. '{open_lanes[0]}:4')"
        )
    spare = pool_size - OWN_CONNECTIONS - given
    if spare < len(open_lanes):
        raise ConfigurationError(
            f"pool_size {pool_size} leaves {max(spare, 0)} thread(s) for lane(s) {names} of "
            f"lanes {lanes!r} (after {OWN_CONNECTIONS} connections of the process's own and "
            f"{given} for the lanes given a width), and each needs at least 1: set "
            f"FERRYMAN_POOL_SIZE (--pool-size) to at least {least}, or narrow the other lanes"
        )
    return lanespec.share(requests, spare)


def check_pool_size(lanes: str, pool_size: int | None) -> int:
    """The pool size a worker with ``lanes`` uses: ``pool_size``, or the lanes' threads +
    OWN_CONNECTIONS when it is None. ConfigurationError (naming FERRYMAN_POOL_SIZE) when
    ``pool_size`` is too small, or the lanes cannot be resolved (``resolve_lanes``)."""
    needed = sum(spec.width for spec in resolve_lanes(lanes, pool_size)) + OWN_CONNECTIONS
    if pool_size is None:
        return needed
    if pool_size < needed:
        raise ConfigurationError(
            f"pool_size {pool_size} is too small for lanes {lanes!r}: they need "
            f"{needed - OWN_CONNECTIONS} connections plus {OWN_CONNECTIONS} of the process's own "
            f"(notifier, poller, cron, heartbeat); set FERRYMAN_POOL_SIZE (--pool-size) to "
            f"at least {needed} or narrow the lanes"
        )
    return pool_size


class Settings(BaseSettings):
    """Settings of every ``ferryman`` process; each field is also ``FERRYMAN_<FIELD>``."""

    model_config = SettingsConfigDict(
        env_prefix="FERRYMAN_", extra="ignore", use_attribute_docstrings=True
    )

    database_url: SecretStr | None = None
    """PostgreSQL URL; never printed or logged. Unset: a command that needs the database starts an
    embedded server (in ``FERRYMAN_EMBEDDED_DIR``), stopped when the last ``ferryman`` process
    using it exits."""

    embedded_dir: str | None = None
    """Data folder of the embedded PostgreSQL; default ``~/.local/share/ferryman/postgres``."""

    lanes: str = "migrations:4,critical:2,default:3"
    """Lanes of the capsule as ``name:threads,...``; each lane is its own thread pool. A lane
    written as a bare ``name`` shares what ``pool_size`` leaves (see ``resolve_lanes``)."""

    pool_size: int | None = None
    """Database connections per worker process; default: the lanes' threads + 4 of its own.
    Required when a lane has no thread count: those lanes share pool size - 4 - the others."""

    imports: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Modules to import for job functions (comma-separated in the environment)."""

    poll_interval: float = Field(default=15.0, gt=0)
    """Seconds between polls: the safety net for a missed notification."""

    claim_window: int = Field(default=100, ge=1)
    """Ready jobs held back by their concurrency key (a job with the same key runs) that a claim
    looks past before it gives up. Running jobs are never in a claim's way."""

    shutdown_grace: float = Field(default=30.0, ge=0)
    """Seconds running jobs get to finish after SIGTERM before the process exits anyway."""

    retention_hours: float = Field(default=72.0, gt=0)
    """Finished job rows and batches older than this are pruned."""

    pressure_threshold: int = Field(default=40, ge=1)
    """Active queries above which jobs that ask for it are deferred instead of run."""

    backoff_base: float = Field(default=1.0, gt=0)
    """Seconds of the first retry delay; doubles per attempt, with jitter."""

    backoff_cap: float = Field(default=600.0, gt=0)
    """Longest retry delay in seconds."""

    heartbeat_interval: float = Field(default=10.0, gt=0)
    """Seconds between a worker process's heartbeats."""

    metrics_port: int = Field(default=0, ge=0, le=65535)
    """Port of the worker's HTTP endpoint (``/metrics``, ``/livez``, ``/readyz``) on every address;
    0 = off."""

    stale_claim_after: float = Field(default=1800.0, gt=0)
    """Seconds without a checkpoint after which the reaper releases a running task's claim."""

    credentials_dir: str = "/var/run/secrets/ferryman"
    """Folder of source credentials for ``ferryman run`` (``<secret name>/<key>``); the
    environment variable ``FERRYMAN_CREDENTIAL_<NAME>__<KEY>`` wins over a file. A run the
    operator admitted uses only the credential sealed for it in the database."""

    local_credentials: bool = True
    """Whether a run whose credential reference names no namespace (a run of ``ferryman run``)
    may take its credential from ``credentials_dir`` or the environment. Off on Kubernetes (the
    chart sets ``false``): there every credential comes sealed in the database at admission, and
    a run row without one is refused instead of reading a local file."""

    sealing_key_file: str = "/var/run/secrets/ferryman-sealing/key"
    """File holding the installation's Fernet key, with which the operator seals each run's
    credential into the database and workers open it (the chart mounts it from a Secret)."""

    source_timeout: float = Field(default=30.0, gt=0)
    """Seconds a call to the source API may take in all (connecting, headers and body, however
    slowly they arrive) before it counts as failed (and is retried)."""

    source_max_response_bytes: int = Field(default=64 * 2**20, ge=1024)
    """Largest answer (decoded) the worker reads from a source API, in bytes (default 64 MiB);
    a larger one is dropped as it streams in and fails its task (smaller pages fix it)."""

    source_max_pages: int = Field(default=100_000, ge=1)
    """Pages one chain of a listing may have when its kind declares no ``maxPages`` (default
    100,000); past it the task fails rather than walk a listing that never ends. A provider's
    ``maxPages`` is its kind's own bound, and wins."""

    sync_windows: bool = False
    """Wait for each window's commit to reach disk (synchronous_commit on). Off by default: a
    window's rows, ledger claims and checkpoint commit atomically and WAL is replayed in order,
    so a database crash loses at most the last windows, whole, and their tasks redo them;
    exactly-once holds either way."""

    reap_interval: float = Field(default=300.0, gt=0)
    """Seconds between the reaper's sweeps in ``ferryman run`` (the chart's CronJob has its own
    schedule)."""

    stalled_batch_after: float = Field(default=300.0, gt=0)
    """Seconds after which the reaper seals a batch whose enqueuing process never sealed it."""

    destination_schemas: Annotated[list[policy.Schema], NoDecode] = Field(
        default=list(policy.DEFAULT_SCHEMAS)
    )
    """Schemas whose tables mappings may write (comma-separated); ferryman's own tables and
    PostgreSQL's schemas never, whatever is listed. Checked at admission and by every writer."""

    destination_tables: Annotated[list[policy.Table], NoDecode] = Field(default_factory=list)
    """Tables (``schema.table``, comma-separated) mappings may write besides those of
    ``destination_schemas``."""

    destination_unscoped: bool = False
    """Let mappings write tables without a workspace column (``workspaceColumn``): their rows
    are every workspace's alike, so only a single-tenant installation turns this on."""

    @field_validator("imports", "destination_schemas", "destination_tables", mode="before")
    @classmethod
    def _split_imports(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("lanes")
    @classmethod
    def _parse_lanes(cls, value: str) -> str:
        lanespec.read_lanes(value)
        return value

    @model_validator(mode="after")
    def _check_pool(self) -> Settings:
        check_pool_size(self.lanes, self.pool_size)
        return self

    @property
    def destinations(self) -> policy.Policy:
        """Where this installation's mappings may write."""
        return policy.Policy(
            schemas=tuple(self.destination_schemas),
            tables=tuple(self.destination_tables),
            unscoped=self.destination_unscoped,
        )

    @property
    def lane_specs(self) -> list[lanespec.LaneSpec]:
        return resolve_lanes(self.lanes, self.pool_size)

    @property
    def threads(self) -> int:
        return sum(spec.width for spec in self.lane_specs)

    @property
    def effective_pool_size(self) -> int:
        return self.pool_size if self.pool_size is not None else self.threads + OWN_CONNECTIONS


class LogSettings(BaseSettings):
    """How a ``ferryman`` process logs; read before ``Settings`` so that even a settings error
    is logged in the chosen format."""

    model_config = SettingsConfigDict(
        env_prefix="FERRYMAN_", extra="ignore", use_attribute_docstrings=True
    )

    log_format: Literal["json", "text"] | None = None
    """``json`` (one object per line) or ``text``; unset: ``text`` on a terminal, else ``json``."""

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """The least severe level logged (``--log-level`` overrides it)."""

    @field_validator("log_format", "log_level", mode="before")
    @classmethod
    def _case(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip()
            return value.lower() if value.lower() in ("json", "text") else value.upper() or None
        return value


def load_logging(level: str | None = None) -> LogSettings:
    """The log settings from the environment, ``level`` (``--log-level``) winning; a bad value
    raises ConfigurationError naming the variable."""
    try:
        return LogSettings(**({"log_level": level} if level else {}))  # type: ignore[arg-type]
    except ValueError as exc:
        raise ConfigurationError(_describe(exc)) from None


def load(**overrides: object) -> Settings:
    """Read settings from the environment, with command-line ``overrides`` (None = not given).

    Raises ConfigurationError with the field's name when a value is invalid.
    """
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)  # type: ignore[arg-type]
    except ConfigurationError:
        raise
    except ValueError as exc:  # pydantic.ValidationError is a ValueError
        raise ConfigurationError(_describe(exc)) from None


def _describe(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if errors is None:
        return str(exc)
    lines = []
    for error in errors():
        field = ".".join(str(part) for part in error["loc"]) or "settings"
        ctx_error = error.get("ctx", {}).get("error")
        message = str(ctx_error) if ctx_error is not None else error["msg"]
        lines.append(f"{field} (FERRYMAN_{field.upper()}): {message}")
    return "invalid settings: " + "; ".join(lines)
