"""Session fixtures for the real source servers of hack/sources (PocketBase, json-server).

    from source_servers import json_server, pocketbase, pocketbase_limited  # in a conftest.py

Each is built or installed into the cache on first use (minutes for PocketBase's cold build),
seeded deterministically with `SEED` at `ORGANIZATIONS` organizations (about 56,000 records),
started on a free 127.0.0.1 port and stopped by pid when the session ends. A build or seed that
fails fails the test with the reason; nothing is skipped.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
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


def started(
    start: Callable[[], Running], stop: Callable[[Running], None], what: str
) -> Iterator[Running]:
    try:
        running = start()
    except SourceServerError as error:
        pytest.fail(f"{what} could not be started: {error}", pytrace=False)
    try:
        yield running
    finally:
        stop(running)


@pytest.fixture(scope="session")
def pocketbase(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A seeded PocketBase, rate limiter off."""
    folder = tmp_path_factory.mktemp("pocketbase")
    yield from started(lambda: pb.start(folder, SEED, ORGANIZATIONS), pb.stop, "PocketBase")


@pytest.fixture(scope="session")
def pocketbase_limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A seeded PocketBase with its rate limiter on at `LIMIT` (its superuser is never limited)."""
    folder = tmp_path_factory.mktemp("pocketbase-limited")
    start = lambda: pb.start(folder, SEED, ORGANIZATIONS, LIMIT)  # noqa: E731
    yield from started(start, pb.stop, "PocketBase (rate-limited)")


@pytest.fixture(scope="session")
def json_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A seeded json-server 0.17.4."""
    folder = tmp_path_factory.mktemp("json-server")
    start = lambda: jsonserver.start(folder, SEED, ORGANIZATIONS)  # noqa: E731
    yield from started(start, jsonserver.stop, "json-server")
