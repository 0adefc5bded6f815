"""Fixtures for the demo CRM tests; the implementation lives in ``server_fixture`` for reuse."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.democrm.server_fixture import DemoCRM

StartDemoCRM = Callable[..., DemoCRM]

SMALL = {"organizations": 120, "people": 60, "deals": 25, "messages_per_deal": 3}
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
