"""Whole databases on a server: a URL for another database, create, drop, and a scratch database
that lives for a ``with`` block. Used by local commands, the test suite and the benchmarks."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator

from psycopg import sql

from ferryman_worker.db import connect, embedded, migrate
from ferryman_worker.db.connect import url_for


def create(
    admin_url: str, name: str, *, template: str | None = None, exist_ok: bool = False
) -> str:
    """Create database ``name`` (as a copy of ``template``); returns its URL."""
    with connect.connect(admin_url) as admin:
        if (
            exist_ok
            and admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        ):
            return url_for(admin_url, name)
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            statement = sql.SQL("{} TEMPLATE {}").format(statement, sql.Identifier(template))
        admin.execute(statement)
    return url_for(admin_url, name)


def drop(admin_url: str, name: str) -> None:
    """Drop database ``name`` if it exists, disconnecting its sessions."""
    with connect.connect(admin_url) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@contextlib.contextmanager
def scratch(
    admin_url: str, name: str, *, template: str | None = None, migrated: bool = True
) -> Iterator[str]:
    """A fresh database (migrated unless ``template`` already is) for the block; dropped after."""
    drop(admin_url, name)
    url = create(admin_url, name, template=template)
    try:
        if migrated and template is None:
            with connect.connect(url) as conn:
                migrate.migrate(conn)
        yield url
    finally:
        drop(admin_url, name)


class Scratchpad:
    """Numbered scratch databases on one server: ``with pad.fresh() as url:`` per scenario."""

    def __init__(self, admin_url: str, prefix: str = "ferryman_scratch") -> None:
        self.admin_url = admin_url
        self.prefix = f"{prefix}_{os.getpid()}"
        self.count = 0

    def fresh(self) -> contextlib.AbstractContextManager[str]:
        self.count += 1
        return scratch(self.admin_url, f"{self.prefix}_{self.count}")


@contextlib.contextmanager
def server(url: str | None, prefix: str = "ferryman-pg-") -> Iterator[str]:
    """The admin URL of ``url``'s server, or of a throwaway embedded server (deleted after)."""
    if url:
        yield url
        return
    started = embedded.start(tempfile.mkdtemp(prefix=prefix), cleanup="delete")
    try:
        yield started.url()
    finally:
        started.stop()
