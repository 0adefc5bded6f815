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

from ferryman_worker.db import connect, databases, embedded, migrate

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
    """A migrated database that every test's database is cloned from."""
    databases.drop(pg_admin_url, TEMPLATE)
    url = databases.create(pg_admin_url, TEMPLATE)
    with connect.connect(url) as conn:
        migrate.migrate(conn)
    return url


@pytest.fixture
def db_url(pg_admin_url: str, template_url: str) -> Iterator[str]:
    """A fresh, migrated database for one test."""
    name = f"ferryman_test_{os.getpid()}_{next(_counter)}"
    with databases.scratch(pg_admin_url, name, template=TEMPLATE) as url:
        yield url


@pytest.fixture
def conn(db_url: str) -> Iterator[connect.Connection]:
    with connect.connect(db_url) as c:
        yield c
