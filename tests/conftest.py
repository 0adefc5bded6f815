"""Shared fixtures: one real PostgreSQL per test process (embedded, or FERRYMAN_TEST_DATABASE_URL's
server), a migrated template database, and a fresh database cloned from it per test.

Under pytest-xdist (`hack/test` runs `-n`), each worker process has its own embedded server and
its own template's name, and the tests that share something expensive or machine-wide are put in
one `xdist_group` so that `--dist loadgroup` keeps them on one worker (`GROUPS`)."""

from __future__ import annotations

import contextlib
import importlib
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
pytest_plugins = ["durations_budget", "xdist_groups", "pytester"]  # see their docstrings
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
"""This xdist worker's name (gw0, gw1, ...), "" without xdist."""
TEMPLATE = f"ferryman_template_{WORKER}" if WORKER else "ferryman_template"
"""Per worker: workers sharing FERRYMAN_TEST_DATABASE_URL's server must not drop each other's."""
_counter = itertools.count()
SHARED_SERVER_GROUP = "postgres-cluster-objects"
"""With FERRYMAN_TEST_DATABASE_URL, the tests that name databases or roles of their own on the
admin connection (roles are cluster-wide): one worker, so two never create the same one."""


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups into the test ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test's xdist group (see `xdist_group`); then the groups that take longest go first
    (`GROUP_WEIGHT`), so that they do not start last while the other workers sit idle."""
    for item in items:
        group = xdist_group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    if WORKER:  # (a serial run keeps the collection order)
        weights = COLD_WEIGHT if os.environ.get(COLD_BUILD) == "1" else GROUP_WEIGHT
        items.sort(key=lambda item: -weights.get(_group_of(item).split(":")[0], 0))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Before a test of a real source server, its build and seeded data (cached; once per
    process), outside the test's timeout: see ``source_servers.prepare``."""
    fixtures = getattr(item, "fixturenames", ())
    if any(name in SERVER_FIXTURES for name in fixtures):
        import source_servers

        capture = item.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            source_servers.prepare(fixtures)
    yield


SERVER_FIXTURES = frozenset(
    {"pocketbase", "pocketbase_limited", "json_server", "start_pocketbase", "start_json_server"}
)
"""The fixtures of tests/support/source_servers.py that start a real server."""


GROUP_WEIGHT = {"node": 3, "k8s": 2, "sources": 1}
"""Which groups go first (stable sort: the collection order within a weight)."""
COLD_WEIGHT = {"node": 3, "sources": 1, "k8s": -1}
"""The same with the control plane still to be built: the node's group first (its process
waits for the build), the other k8s groups last, so that the other processes run the tests that
need no control plane meanwhile."""
COLD_BUILD = "FERRYMAN_TEST_COLD_BUILD"
"""Set by the controlling process before its test processes start ("1": the control plane's
binaries are still to be built), so that every process sorts its tests alike."""


def pytest_configure(config: pytest.Config) -> None:
    """In the controlling process: whether the build is still to come (``COLD_BUILD``)."""
    if not WORKER and COLD_BUILD not in os.environ:
        os.environ[COLD_BUILD] = "0" if _control_plane_built() else "1"


def _control_plane_built() -> bool:
    """Whether every binary of the control plane and the node is in its cache."""
    sys.path.insert(0, str(ROOT / "hack" / "cp"))
    try:
        gobuild = importlib.import_module("controlplane.gobuild")
    finally:
        sys.path.remove(str(ROOT / "hack" / "cp"))
    return all(path.exists() for path in gobuild.binaries(node=True).values())


def xdist_group(item: pytest.Item) -> str | None:
    """The group a test runs in, by what it shares:

    - `node`: every test marked `node` (one node per machine: kubelet's fixed paths, and the
      session's control plane carries it);
    - `k8s:<module>`: the other tests marked `k8s`, by module (each worker starts its own control
      plane; a module shares its `release`);
    - `sources:<fixture>`: the tests of one session-wide real source server (PocketBase, its
      rate-limited twin, json-server), so each is started and seeded once;
    - `SHARED_SERVER_GROUP` with FERRYMAN_TEST_DATABASE_URL (see there)."""
    if item.get_closest_marker("node"):
        return "node"
    if item.get_closest_marker("k8s"):
        return f"k8s:{item.nodeid.split('::')[0]}"
    names = getattr(item, "fixturenames", ())
    for server in SESSION_SERVERS:
        if server in names:
            return f"sources:{server}"
    if os.environ.get("FERRYMAN_TEST_DATABASE_URL") and _names_cluster_objects(item):
        return SHARED_SERVER_GROUP
    return None


SESSION_SERVERS = ("pocketbase_limited", "pocketbase", "json_server")
"""The session fixtures of tests/support/source_servers.py."""


def _group_of(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0]) if marker and marker.args else ""


def _names_cluster_objects(item: pytest.Item) -> bool:
    """The test, or a fixture it uses other than this file's, asks for `pg_admin_url` itself."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    if "pg_admin_url" in info.argnames:
        return True
    own = {"template_url", "db_url", "conn"}
    return any(
        "pg_admin_url" in definition.argnames
        for name, definitions in info.name2fixturedefs.items()
        if name not in own
        for definition in definitions
    )


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
