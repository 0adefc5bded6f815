"""Schema migrations: ordered SQL files in ``sql/migrations/``, each applied in its own
transaction and recorded in ``ferryman_schema_migrations``.

Several processes may migrate at once (every worker does at start-up): a session advisory lock
serialises them, and whoever comes second finds nothing left to do.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import importlib.resources
import re
from typing import LiteralString, cast

import psycopg

from ferryman_worker.db.connect import Connection
from ferryman_worker.errors import MigrationError

MIGRATION_LOCK = (1718772480, 1)
"""Advisory lock key (two-int space) held while migrating."""

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_BOOKKEEPING: LiteralString = """
CREATE TABLE IF NOT EXISTS ferryman_schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


@dataclasses.dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class MigrationState:
    migration: Migration
    applied_at: datetime.datetime | None


def available() -> list[Migration]:
    """The migrations shipped with the package, in order."""
    folder = importlib.resources.files("ferryman_worker.db").joinpath("sql", "migrations")
    found = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    return sorted(found, key=lambda m: m.version)


def status(conn: Connection) -> list[MigrationState]:
    """Every shipped migration with the time it was applied (None: pending)."""
    applied = _applied(conn)
    return [MigrationState(m, applied.get(m.version)) for m in available()]


def migrate(conn: Connection) -> list[Migration]:
    """Apply the pending migrations; returns those this call applied."""
    conn.execute("SELECT pg_advisory_lock(%s, %s)", MIGRATION_LOCK)
    try:
        applied = _applied(conn)
        pending = [m for m in available() if m.version not in applied]
        for migration in pending:
            _apply(conn, migration)
        return pending
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", MIGRATION_LOCK)


def check_current(conn: Connection) -> None:
    """Raise MigrationError unless every shipped migration has been applied."""
    pending = [state.migration for state in status(conn) if state.applied_at is None]
    if pending:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in pending)
        raise MigrationError(
            f"the database schema is not up to date (pending: {names}); run `ferryman db migrate`"
        )


def _applied(conn: Connection) -> dict[int, datetime.datetime]:
    conn.execute(_BOOKKEEPING)
    rows = conn.execute("SELECT version, applied_at FROM ferryman_schema_migrations").fetchall()
    return {
        int(cast(int, row["version"])): cast(datetime.datetime, row["applied_at"]) for row in rows
    }


def _apply(conn: Connection, migration: Migration) -> None:
    try:
        with conn.transaction():
            conn.execute(migration.sql)  # trusted: shipped with the package
            conn.execute(
                "INSERT INTO ferryman_schema_migrations (version, name, checksum)"
                " VALUES (%s, %s, %s)",
                (migration.version, migration.name, migration.checksum),
            )
    except psycopg.Error as exc:
        raise MigrationError(
            f"migration {migration.version:04d}_{migration.name} failed and was rolled back: "
            f"{str(exc).strip().splitlines()[0]}"
        ) from exc
