"""Crashes: worker processes SIGKILLed at random moments, and PostgreSQL restarted, mid-run.

Every source row must still be written exactly once, no task stranded, the run Succeeded, and
each kill may cost at most the tasks that were running in the killed process."""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest
from migration import (
    SECRET,
    barrier_held,
    check_against_truth,
    extra_claims,
    request,
    start_run,
    state,
    wait_finished,
)
from tests.democrm.server_fixture import DemoCRM
from workers import Subprocess, wait_for

from ferryman_worker.db import databases, embedded
from ferryman_worker.engine.runtime import credential_env_var

LANE_WIDTH = 2
SLOW: dict[str, Any] = {
    "organizations": 6000,
    "people": 1500,
    "deals": 1500,
    "messages_per_deal": 3,
    "malformed_rate": 0.02,
    "latency_ms": 60,
    "body_latency_ms": 20,
}


def _worker(db_url: str, api_key: str) -> Subprocess:
    env = {credential_env_var(SECRET["name"], SECRET["key"]): api_key}
    proc = Subprocess(db_url, f"migrations:{LANE_WIDTH}", env)
    proc.wait_ready()
    return proc


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_run_survives_ten_sigkills_of_its_workers(db_url: str) -> None:
    rng = random.Random(20261130)
    with DemoCRM.start(seed=21, **SLOW) as crm:
        workers = [_worker(db_url, crm.api_key) for _ in range(3)]
        try:
            run_id = start_run(db_url, request(crm.url, page_size=50, max_in_flight=6))
            kills = 0
            while kills < 10:
                time.sleep(rng.uniform(0.5, 1.2))
                assert state(db_url, run_id)["state"] == "running", "the run ended too soon"
                victim = workers.pop(rng.randrange(len(workers)))
                victim.kill()
                kills += 1
                workers.append(_worker(db_url, crm.api_key))
            final = wait_finished(db_url, run_id, timeout=300)
            truth = crm.truth()
        finally:
            for proc in workers:
                proc.stop()
    assert final["state"] == "succeeded", final["error"]
    assert final["tasks_done"] == final["tasks_total"]  # nothing stranded
    check_against_truth(db_url, truth)
    barrier_held(db_url, run_id)
    assert extra_claims(db_url, run_id) <= kills * LANE_WIDTH


@pytest.fixture
def restartable(
    db_url: str, pg_server: embedded.EmbeddedServer | None
) -> Iterator[tuple[str, embedded.EmbeddedServer]]:
    """A migrated database on a server this test may restart: the session's embedded server, or,
    when the suite runs against FERRYMAN_TEST_DATABASE_URL (a server it must not restart), an
    embedded server of its own, deleted after."""
    if pg_server is not None:
        yield db_url, pg_server
        return
    server = embedded.start(tempfile.mkdtemp(prefix="ferryman-test-restart-"), cleanup="delete")
    try:
        with databases.scratch(server.url(), "ferryman_restart") as url:
            yield url, server
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_run_survives_a_postgresql_restart(
    restartable: tuple[str, embedded.EmbeddedServer],
) -> None:
    db_url, pg_server = restartable
    with DemoCRM.start(seed=22, **SLOW) as crm:
        workers = [_worker(db_url, crm.api_key) for _ in range(2)]
        try:
            run_id = start_run(db_url, request(crm.url, page_size=50, max_in_flight=4))
            wait_for(lambda: state(db_url, run_id)["rows_written"] > 1000, 60, "progress")
            pg_server.restart()
            wait_for(
                lambda: state(db_url, run_id)["rows_written"] > 3000,
                60,
                "progress after the restart",
            )
            pg_server.restart()
            final = wait_finished(db_url, run_id, timeout=300)
            truth = crm.truth()
            alive = [proc.proc.poll() is None for proc in workers]
        finally:
            for proc in workers:
                proc.stop()
    assert alive == [True, True]  # a restart costs a reconnect, not a process
    assert final["state"] == "succeeded", final["error"]
    assert final["tasks_done"] == final["tasks_total"]
    check_against_truth(db_url, truth)
    barrier_held(db_url, run_id)
