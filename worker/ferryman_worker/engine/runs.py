"""Runs: admission (one live run per workspace, decided by the database), start, progress,
suspend, resume and cancel. What the operator may call goes through ``ferryman_worker.contract``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

import psycopg
from psycopg.types.json import Jsonb

from ferryman_worker import destinations, providers
from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.destination_policy import Policy
from ferryman_worker.engine import delta, phases, schedule
from ferryman_worker.errors import ConfigurationError, FerrymanError
from ferryman_worker.providers import Provider, phases_for
from ferryman_worker.providers import resolve as resolve_provider


class AdmissionRefused(FerrymanError):
    """The workspace already has a live run; ``live_run`` names it."""

    def __init__(self, workspace: str, live_run: str) -> None:
        super().__init__(
            f"workspace {workspace!r} already has a live run, {live_run!r}: wait for it to "
            "finish, or cancel it, before starting another"
        )
        self.workspace = workspace
        self.live_run = live_run


class WorkspaceOwned(FerrymanError):
    """The workspace belongs to another namespace; ``owner`` names it."""

    def __init__(self, workspace: str, owner: str, namespace: str) -> None:
        super().__init__(
            f"spec.workspace: workspace {workspace!r} belongs to namespace {owner!r}; a run in "
            f"namespace {namespace!r} cannot import into it: choose a workspace of your own"
        )
        self.workspace = workspace
        self.owner = owner


@dataclasses.dataclass(frozen=True)
class Sealed:
    """A run's credential as the operator sealed it at admission: the hosts it is bound to
    (not secret) and the sealed blob (``credentials.Sealer``)."""

    hosts: tuple[str, ...]
    blob: bytes


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """What admission needs; built from a MigrationRun by the contract. ``namespace`` is set
    for a run of a namespace (the operator's): its workspace must be the namespace's own, and
    its credential comes ``sealed``."""

    name: str
    workspace: str
    provider: str
    base_url: str
    credential: dict[str, str]
    kinds: list[str]
    options: dict[str, Any]
    source_options: dict[str, str] = dataclasses.field(default_factory=dict)
    """``spec.source.options``: checked against the provider's options at admission."""
    provider_definition: dict[str, Any] | None = None
    """A declarative provider's definition, snapshotted into the run (None: an installed
    provider, found by name)."""
    mapping: dict[str, Any] | None = None
    """``spec.mapping`` as parsed; None: the mapping shipped for the provider, if any."""
    namespace: str | None = None
    sealed: Sealed | None = None
    mode: Literal["full", "delta"] = "full"
    """``spec.mode``: a delta reads what changed since the workspace's last successful run."""
    destinations: Policy = dataclasses.field(default_factory=Policy)
    """Where the installation lets mappings write (its settings)."""


def admit(conn: Connection, request: RunRequest) -> dict[str, Any]:
    """Insert the run (with its sealed credential); AdmissionRefused if the workspace has a
    live run (even under a race), WorkspaceOwned if another namespace owns the workspace,
    ConfigurationError if the provider or a writer of its kinds is missing, or its mapping
    cannot write here (every problem, one a line)."""
    provider = resolve_provider(request.provider, request.provider_definition)
    run_phases = phases_for(provider, request.kinds)
    mapping = destinations.mapping_for(request.mapping, provider)
    snapshot = None
    if mapping is not None:
        kinds = [kind for phase in run_phases for kind in phase]
        parents = {k: p for k in kinds if (p := provider.kinds[k].parent) is not None}
        run_phases = mapping.phases_for(run_phases, parents)
        snapshot = destinations.snapshot(conn, mapping, kinds, request.destinations)
    options = {**request.options, "source": providers.options_for(provider, request.source_options)}
    if request.mode == delta.DELTA:
        kinds = [kind for phase in run_phases for kind in phase]
        since = delta.starting_points(conn, request.workspace, kinds)
        options = {**options, "mode": delta.DELTA, "since": since}
    params: dict[str, Any] = {
        "name": request.name,
        "workspace": request.workspace,
        "provider": request.provider,
        "base_url": request.base_url,
        "credential": Jsonb(request.credential),
        "kinds": [kind for phase in run_phases for kind in phase],
        "phases": Jsonb(run_phases),
        "options": Jsonb(options),
        "mapping": Jsonb(snapshot) if snapshot is not None else None,
        "provider_definition": None
        if request.provider_definition is None
        else Jsonb(request.provider_definition),
    }
    kinds = [kind for phase in run_phases for kind in phase]
    run = {**params, "options": options, "mapping": snapshot}
    _check_writers(conn, run, provider, kinds, request.destinations)
    try:
        with conn.transaction():
            _claim_workspace(conn, request)
            row = conn.execute(queries.engine("admit_run"), params).fetchone()
            assert row is not None
            _store(conn, row["id"], request.sealed)
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name != "ferryman_runs_one_live":
            raise
        raise _refused(conn, request.workspace) from None
    assert row is not None
    return row


def _store(conn: Connection, run_id: int, sealed: Sealed | None) -> None:
    if sealed is not None:
        conn.execute(
            queries.engine("store_credential"),
            {"run_id": run_id, "hosts": list(sealed.hosts), "sealed": sealed.blob},
        )


def _claim_workspace(conn: Connection, request: RunRequest) -> None:
    """The run's namespace owns its workspace (it claims it if no one has); WorkspaceOwned if
    another namespace does. A run without a namespace (``ferryman run``) claims nothing."""
    if request.namespace is None:
        return
    params = {"workspace": request.workspace, "namespace": request.namespace}
    owner = conn.execute(queries.engine("claim_workspace"), params).fetchone()
    if owner is None:  # lost a race to a claim its statement's snapshot did not see: look again
        owner = conn.execute(queries.engine("claim_workspace"), params).fetchone()
    assert owner is not None
    if owner["namespace"] != request.namespace:
        raise WorkspaceOwned(request.workspace, owner["namespace"], request.namespace)


def _refused(conn: Connection, workspace: str) -> AdmissionRefused:
    live = conn.execute(
        queries.engine("live_run_of_workspace"), {"workspace": workspace}
    ).fetchone()
    return AdmissionRefused(workspace, live["name"] if live else "?")


def _check_writers(
    conn: Connection, run: dict[str, Any], provider: Provider, kinds: list[str], allowed: Policy
) -> None:
    """ConfigurationError, before any task exists, naming every kind whose writer cannot
    write in this database (the writer a worker builds, checked as the worker checks it)."""
    problems = [
        f"{kind}: {problem}"
        for kind in kinds
        for problem in destinations.writer_for(run, provider, kind, allowed).problems(conn)
    ]
    if problems:
        raise ConfigurationError(
            f"spec.source.provider: {provider.name!r} cannot write here:\n" + "\n".join(problems)
        )


def start(conn: Connection, run: dict[str, Any]) -> list[int]:
    """Seed the first phase and queue up to the in-flight limit, in one transaction."""
    provider = providers.of_run(run)
    with conn.transaction():
        locked = lock(conn, run["id"])
        if phases.seed_phase(conn, locked, provider, int(locked["phase"])) == 0:
            phases.close_if_done(conn, locked, provider)
            locked = lock(conn, run["id"])
        return schedule.top_up(conn, locked)


def lock(conn: Connection, run_id: int) -> dict[str, Any]:
    row = conn.execute(queries.engine("lock_run"), {"run_id": run_id}).fetchone()
    if row is None:
        raise FerrymanError(f"run {run_id} does not exist")
    return row


def by_name(conn: Connection, name: str) -> dict[str, Any] | None:
    row: dict[str, Any] | None = conn.execute(
        queries.engine("run_by_name"), {"name": name}
    ).fetchone()
    return row


def progress(conn: Connection, run_id: int | None = None) -> list[dict[str, Any]]:
    """One aggregate row per run (or for one run): tasks by state and row counts."""
    params = {"run_id": run_id, "names": None}
    return conn.execute(queries.engine("run_progress"), params).fetchall()


def retrying(conn: Connection, run_id: int) -> dict[str, Any] | None:
    """The tasks of a running, not suspended run that wait to try again after a failed attempt:
    ``tasks`` (how many) and the latest failure (task_id, kind, last_error, attempts,
    max_attempts, run_at); None if there are none."""
    return retrying_of(conn, [run_id]).get(run_id)


def retrying_of(conn: Connection, run_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """``retrying`` of each run of ``run_ids`` that has such tasks, in one statement."""
    rows = conn.execute(queries.engine("run_retrying"), {"run_ids": list(run_ids)}).fetchall()
    return {int(row["run_id"]): row for row in rows}


def live_progress(conn: Connection, names: Sequence[str]) -> list[dict[str, Any]]:
    """``progress`` of each run named in ``names`` (those that exist), with its provider and
    options, in one statement."""
    params = {"run_id": None, "names": list(names)}
    return conn.execute(queries.engine("run_progress"), params).fetchall()


def row_errors(
    conn: Connection, run_id: int, kind: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """The run's row errors (kind, source_id, reason, at), oldest first, at most ``limit``;
    each row also carries ``total``, how many there are in all."""
    params = {"run_id": run_id, "kind": kind, "limit": limit}
    return conn.execute(queries.engine("row_errors"), params).fetchall()


def kind_progress(conn: Connection, run_id: int) -> list[dict[str, Any]]:
    return kind_progress_of(conn, [run_id])


def kind_progress_of(conn: Connection, run_ids: Sequence[int]) -> list[dict[str, Any]]:
    """Per run of ``run_ids`` (``run_id``) and kind: its tasks, rows and active seconds."""
    return conn.execute(queries.engine("kind_progress"), {"run_ids": list(run_ids)}).fetchall()


def suspend(conn: Connection, run_id: int) -> bool:
    """Pause a running run: running tasks stop at their next window boundary."""
    return _stop(conn, run_id, "set_suspended", {"suspended": True}, queued="pending")


def resume(conn: Connection, run_id: int) -> list[int]:
    """Continue a suspended (or stalled) run from its checkpoints."""
    with conn.transaction():
        conn.execute(queries.engine("set_suspended"), {"run_id": run_id, "suspended": False})
        return schedule.top_up(conn, lock(conn, run_id))


def retry(conn: Connection, run_id: int, sealed: Sealed | None = None) -> int:
    """Reopen a failed run from its checkpoints: every unfinished task goes back to pending and
    is queued again; what the run wrote stays written (the ledger keeps each row once); with
    ``sealed``, its credential as the Secret is now. Returns how many tasks were reopened.
    AdmissionRefused if its workspace has another live run; FerrymanError if the run did not
    fail."""
    run = conn.execute(queries.engine("run_by_id"), {"run_id": run_id}).fetchone()
    if run is None:
        raise FerrymanError(f"run {run_id} does not exist")
    try:
        with conn.transaction():
            if conn.execute(queries.engine("reopen_run"), {"run_id": run_id}).fetchone() is None:
                raise FerrymanError(
                    f"run {run['name']!r} is {run['state']}, not failed: only a failed run can be"
                    " retried"
                )
            _store(conn, run_id, sealed)
            reopened = conn.execute(queries.engine("reopen_tasks"), {"run_id": run_id}).rowcount
            schedule.top_up(conn, lock(conn, run_id))
    except psycopg.errors.UniqueViolation as exc:
        if exc.diag.constraint_name != "ferryman_runs_one_live":
            raise
        raise _refused(conn, run["workspace"]) from None
    return reopened


def forget_name(conn: Connection, name: str) -> str | None:
    """Rename the finished run ``name`` to ``name@id`` (its new name; None if there is no such
    finished run), so the name can be admitted again."""
    row = conn.execute(queries.engine("forget_run_name"), {"name": name}).fetchone()
    return None if row is None else str(row["name"])


def cancel(conn: Connection, run_id: int, reason: str = "cancelled") -> bool:
    """End a run for good: its tasks stop at their next window boundary."""
    change = {"state": "cancelled", "error": reason}
    return _stop(conn, run_id, "finish_run", change, queued="cancelled")


def _stop(
    conn: Connection, run_id: int, query: str, change: dict[str, Any], *, queued: str
) -> bool:
    """Suspend or cancel: the run's row changed by engine query ``query`` and its queued tasks
    (not started yet: their jobs will exit) made ``queued``, in one transaction. Whether the run
    changed (it was running)."""
    with conn.transaction():
        done = conn.execute(queries.engine(query), {"run_id": run_id, **change}).fetchone()
        conn.execute(queries.engine("release_queued_tasks"), {"run_id": run_id, "status": queued})
    return done is not None
