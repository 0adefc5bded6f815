"""Schema migrations: ordered SQL files in ``sql/migrations/``, each applied in its own
transaction and recorded in ``ferryman_schema_migrations``; then those of plug-ins.

A plug-in (a provider package outside ferryman, with its destination tables and writer
functions) registers a package of ``NNNN_name.sql`` files in the ``ferryman.migrations``
entry-point group; they are applied after ferryman's own, in order, and recorded per plug-in in
``ferryman_plugin_migrations`` (created when the first plug-in shows up).

Only ``migrate`` changes the schema, the bookkeeping tables included: ``status`` and
``check_current`` only read, so a role without DDL rights (the workers', the reaper's) can check
that the schema is current. Several processes may migrate at once (the migration job, workers
started with ``--migrate``): a session advisory lock serialises them, and whoever comes second
finds nothing left to do.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import importlib.metadata
import importlib.resources
import re
from importlib.resources.abc import Traversable
from typing import LiteralString, cast

import psycopg

from ferryman_worker.db.connect import Connection
from ferryman_worker.errors import MigrationError

MIGRATION_LOCK = (1718772480, 1)
"""Advisory lock key (two-int space) held while migrating."""

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

PLUGINS = "ferryman.migrations"
"""Entry-point group: name -> a package of a plug-in's migrations."""

_BOOKKEEPING: LiteralString = """
CREATE TABLE IF NOT EXISTS ferryman_schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""

_PLUGIN_BOOKKEEPING: LiteralString = """
CREATE TABLE IF NOT EXISTS ferryman_plugin_migrations (
    plugin     text        NOT NULL,
    version    integer     NOT NULL,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (plugin, version)
)"""


_PRESENT: LiteralString = """
SELECT to_regclass('ferryman_schema_migrations') IS NOT NULL AS own,
       to_regclass('ferryman_plugin_migrations') IS NOT NULL AS plugins"""


@dataclasses.dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str
    plugin: str | None = None
    """None: ferryman's own; else the plug-in (entry-point name) that ships it."""

    @property
    def label(self) -> str:
        own = f"{self.version:04d}_{self.name}"
        return own if self.plugin is None else f"{self.plugin}/{own}"

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class MigrationState:
    migration: Migration
    applied_at: datetime.datetime | None


def available(plugins: dict[str, str] | None = None) -> list[Migration]:
    """The migrations to apply, in order: ferryman's own, then each plug-in's (``plugins``:
    name -> package; default: the ``ferryman.migrations`` entry points)."""
    found = _read(importlib.resources.files("ferryman_worker.db").joinpath("sql", "migrations"))
    for plugin, package in sorted((installed_plugins() if plugins is None else plugins).items()):
        found += _read(importlib.resources.files(package), plugin)
    return found


def installed_plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group=PLUGINS)}


def _read(folder: Traversable, plugin: str | None = None) -> list[Migration]:
    found = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(), plugin))
    return sorted(found, key=lambda m: m.version)


def status(conn: Connection, plugins: dict[str, str] | None = None) -> list[MigrationState]:
    """Every migration with the time it was applied (None: pending)."""
    migrations = available(plugins)
    applied = _applied(conn)
    return [MigrationState(m, applied.get((m.plugin, m.version))) for m in migrations]


def migrate(conn: Connection, plugins: dict[str, str] | None = None) -> list[Migration]:
    """Apply the pending migrations; returns those this call applied."""
    conn.execute("SELECT pg_advisory_lock(%s, %s)", MIGRATION_LOCK)
    try:
        conn.execute(_BOOKKEEPING)
        if any(m.plugin for m in available(plugins)):
            conn.execute(_PLUGIN_BOOKKEEPING)
        pending = [state.migration for state in status(conn, plugins) if not state.applied_at]
        for migration in pending:
            _apply(conn, migration)
        return pending
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", MIGRATION_LOCK)


def check_current(conn: Connection, plugins: dict[str, str] | None = None) -> None:
    """Raise MigrationError unless every migration has been applied."""
    pending = [state.migration for state in status(conn, plugins) if state.applied_at is None]
    if pending:
        names = ", ".join(m.label for m in pending)
        raise MigrationError(
            f"the database schema is not up to date (pending: {names}); run `ferryman db migrate`"
        )


def _applied(conn: Connection) -> dict[tuple[str | None, int], datetime.datetime]:
    """What the bookkeeping tables record; a table that does not exist yet records nothing."""
    present = conn.execute(_PRESENT).fetchone()
    assert present is not None
    rows = []
    if present["own"]:
        rows += conn.execute(
            "SELECT NULL::text AS plugin, version, applied_at FROM ferryman_schema_migrations"
        ).fetchall()
    if present["plugins"]:
        rows += conn.execute(
            "SELECT plugin, version, applied_at FROM ferryman_plugin_migrations"
        ).fetchall()
    return {
        (row["plugin"], int(cast(int, row["version"]))): cast(datetime.datetime, row["applied_at"])
        for row in rows
    }


def _apply(conn: Connection, migration: Migration) -> None:
    try:
        with conn.transaction():
            conn.execute(migration.sql)  # trusted: shipped with the package
            if migration.plugin is None:
                conn.execute(
                    "INSERT INTO ferryman_schema_migrations (version, name, checksum)"
                    " VALUES (%s, %s, %s)",
                    (migration.version, migration.name, migration.checksum),
                )
            else:
                conn.execute(
                    "INSERT INTO ferryman_plugin_migrations (plugin, version, name, checksum)"
                    " VALUES (%s, %s, %s, %s)",
                    (migration.plugin, migration.version, migration.name, migration.checksum),
                )
    except psycopg.Error as exc:
        raise MigrationError(
            f"migration {migration.label} failed and was rolled back: "
            f"{str(exc).strip().splitlines()[0]}"
        ) from exc
