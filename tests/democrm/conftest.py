"""Fixtures for the demo CRM tests; the implementation lives in ``server_fixture`` for reuse."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.democrm.server_fixture import DemoCRM

StartDemoCRM = Callable[..., DemoCRM]

SMALL: dict[str, Any] = {"organizations": 120, "people": 60, "deals": 25, "messages_per_deal": 3}
"""A dataset small enough to read whole in a test."""


@pytest.fixture
def start_democrm() -> Iterator[StartDemoCRM]:
    """``start_democrm(**options)`` starts a server; every one started is stopped afterwards."""
    started: list[DemoCRM] = []

    def start(**options: Any) -> DemoCRM:
        crm = DemoCRM.start(**options)
        started.append(crm)
        return crm

    yield start
    for crm in started:
        crm.stop()


@pytest.fixture
def democrm(start_democrm: StartDemoCRM) -> DemoCRM:
    """A server with the small dataset, seed 1, 5 % malformed records, no budget, no faults."""
    return start_democrm(seed=1, malformed_rate=0.05, **SMALL)


@pytest.fixture(scope="session")
def shared_democrm() -> Iterator[DemoCRM]:
    """One small-dataset server for the whole session, for tests that only read.

    Never reconfigure it or rely on its ``/_stats``; use ``democrm`` for that."""
    with DemoCRM.start(seed=1, malformed_rate=0.05, **SMALL) as crm:
        yield crm
