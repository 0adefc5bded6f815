"""Fixtures for the real source servers of hack/sources (PocketBase, json-server).

    from source_servers import json_server, pocketbase, pocketbase_limited  # in a conftest.py
    from source_servers import start_json_server, start_pocketbase  # per-test servers

Each server is built or installed into the cache on first use (minutes for PocketBase's cold
build), seeded deterministically with `SEED` at `ORGANIZATIONS` organizations (about 56,000
records), started on a free 127.0.0.1 port and stopped by pid afterwards. A build or seed that
fails fails the test with the reason; nothing is skipped. The session servers are shared: a test
that writes to a server, stops it or spends its rate limit starts its own with
`start_pocketbase(...)` or `start_json_server(...)` (stopped after the test).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "hack" / "sources"))

from sourceservers import crm, jsonserver, process
from sourceservers import pocketbase as pb
from sourceservers.cache import SourceServerError

SEED = crm.DEFAULT_SEED
ORGANIZATIONS = crm.DEFAULT_ORGANIZATIONS
LIMIT = pb.RateLimit(requests=5, seconds=60)
"""pocketbase_limited's limiter: 5 requests a minute per collection and action, for users."""

Running = process.Running
StartServer = Callable[..., Running]

PREPARED: set[str] = set()
"""The servers this process has built and seeded (``prepare``)."""


def prepare(fixtures: Iterable[str]) -> None:
    """Build (or install) and seed, into the cache, the servers that ``fixtures`` start, once
    per process: ``tests/conftest.py`` calls it before a test's fixtures are set up, outside
    its timeout (PocketBase's cold build takes minutes, more beside another build). A failure
    is left for the fixture to report."""
    names = set(fixtures)
    wanted = {
        "pocketbase": bool(names & {"pocketbase", "pocketbase_limited", "start_pocketbase"}),
        "json-server": bool(names & {"json_server", "start_json_server"}),
    }
    for server in [name for name, used in wanted.items() if used and name not in PREPARED]:
        PREPARED.add(server)
        try:
            if server == "pocketbase":
                pb.seeded_data(pb.build(), SEED, ORGANIZATIONS)
            else:
                jsonserver.install()
                jsonserver.database(SEED, ORGANIZATIONS)
        except SourceServerError:
            pass  # the fixture fails the test with the reason


def launch(start: Callable[[], Running], what: str) -> Running:
    """`start()`, failing the test with the reason if the server cannot be built or started."""
    try:
        return start()
    except SourceServerError as error:
        pytest.fail(f"{what} could not be started: {error}", pytrace=False)


@pytest.fixture(scope="session")
def pocketbase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A seeded PocketBase, rate limiter off."""
    folder = tmp_path_factory.mktemp("pocketbase")
    running = launch(lambda: pb.start(folder, SEED, ORGANIZATIONS), "PocketBase")
    yield running
    pb.stop(running)


@pytest.fixture(scope="session")
def pocketbase_limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A seeded PocketBase with its rate limiter on at `LIMIT` (its superuser is never limited)."""
    folder = tmp_path_factory.mktemp("pocketbase-limited")
    start = lambda: pb.start(folder, SEED, ORGANIZATIONS, LIMIT)  # noqa: E731
    running = launch(start, "PocketBase (rate-limited)")
    yield running
    pb.stop(running)


@pytest.fixture(scope="session")
def json_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A seeded json-server 0.17.4."""
    folder = tmp_path_factory.mktemp("json-server")
    running = launch(lambda: jsonserver.start(folder, SEED, ORGANIZATIONS), "json-server")
    yield running
    jsonserver.stop(running)


@pytest.fixture
def start_pocketbase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartServer]:
    """`start_pocketbase(seed=, organizations=, rate_limit=)`: a PocketBase of the test's own."""
    servers: list[Running] = []

    def start(
        seed: int = SEED, organizations: int = ORGANIZATIONS, rate_limit: pb.RateLimit | None = None
    ) -> Running:
        folder = tmp_path_factory.mktemp("pocketbase")
        running = launch(lambda: pb.start(folder, seed, organizations, rate_limit), "PocketBase")
        servers.append(running)
        return running

    yield start
    for running in servers:
        pb.stop(running)


@pytest.fixture
def start_json_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartServer]:
    """`start_json_server(seed=, organizations=, rate_limit=)`: a json-server of the test's own
    (with `rate_limit`, behind hack/sources/json-server/ratelimit.js)."""
    servers: list[Running] = []

    def start(
        seed: int = SEED, organizations: int = ORGANIZATIONS, rate_limit: pb.RateLimit | None = None
    ) -> Running:
        folder = tmp_path_factory.mktemp("json-server")
        begin = lambda: jsonserver.start(folder, seed, organizations, rate_limit)  # noqa: E731
        running = launch(begin, "json-server")
        servers.append(running)
        return running

    yield start
    for running in servers:
        jsonserver.stop(running)
