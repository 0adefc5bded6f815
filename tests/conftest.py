"""Shared fixtures: one real PostgreSQL per test session (embedded, or FERRYMAN_TEST_DATABASE_URL's
server), a migrated template database, and a fresh database cloned from it per test."""

from __future__ import annotations

import itertools
import os
import pathlib
import sys
import tempfile
from collections.abc import Iterator

import pytest
from psycopg import sql

from ferryman_worker.db import connect, embedded, migrate

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUPPORT = ROOT / "tests" / "support"
sys.path.insert(0, str(SUPPORT))  # test job modules, importable here and by worker subprocesses
TEMPLATE = "ferryman_template"
_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[embedded.EmbeddedServer | None]:
    """The embedded server the session owns (None with FERRYMAN_TEST_DATABASE_URL)."""
    if os.environ.get("FERRYMAN_TEST_DATABASE_URL"):
        yield None
        return
    folder = tempfile.mkdtemp(prefix="ferryman-test-pg-")
    server = embedded.start(folder, cleanup="delete")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_admin_url(pg_server: embedded.EmbeddedServer | None) -> str:
    """URL of the maintenance database of the session's server."""
    return pg_server.url() if pg_server else os.environ["FERRYMAN_TEST_DATABASE_URL"]


@pytest.fixture(scope="session")
def template_url(pg_admin_url: str) -> str:
    with connect.connect(pg_admin_url) as admin:
        _drop(admin, TEMPLATE)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))
    url = _with_db(pg_admin_url, TEMPLATE)
    with connect.connect(url) as conn:
        migrate.migrate(conn)
    return url


@pytest.fixture
def db_url(pg_admin_url: str, template_url: str) -> Iterator[str]:
    """A fresh, migrated database for one test."""
    name = f"ferryman_test_{os.getpid()}_{next(_counter)}"
    with connect.connect(pg_admin_url) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(TEMPLATE)
            )
        )
    try:
        yield _with_db(pg_admin_url, name)
    finally:
        with connect.connect(pg_admin_url) as admin:
            _drop(admin, name)


@pytest.fixture
def conn(db_url: str) -> Iterator[connect.Connection]:
    with connect.connect(db_url) as c:
        yield c


def _drop(admin: connect.Connection, name: str) -> None:
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _with_db(url: str, dbname: str) -> str:
    """``url`` pointing at another database (works for socket and host URLs)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo(**params)  # type: ignore[arg-type]
