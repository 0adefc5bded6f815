"""Crashes: worker processes SIGKILLed at random moments, and PostgreSQL restarted, mid-run.

Every source row must still be written exactly once, no task stranded, the run Succeeded, and
each kill may cost at most the tasks that were running in the killed process."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import ferryman_testjobs as tj
import pytest
from migration import (
    SECRET,
    barrier_held,
    check_against_truth,
    extra_claims,
    request,
    sigkill_mid_run,
    start_run,
    state,
    wait_finished,
)
from net import wait_for
from tests.democrm.server_fixture import DemoCRM
from workers import Subprocess, scalar, subprocesses

from ferryman_worker.db import connect, databases, embedded
from ferryman_worker.engine.runtime import credential_env_var
from ferryman_worker.queue import enqueue_many

LANE_WIDTH = 2
KINDS = ("organizations", "people", "deals", "messages")
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
    """A worker process, started (``sigkill_mid_run`` waits for it only when it is to be killed:
    on a loaded machine a start can take longer than what is left of the run)."""
    env = {credential_env_var(SECRET["name"], SECRET["key"]): api_key}
    return Subprocess(db_url, f"migrations:{LANE_WIDTH}", env)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_run_survives_ten_sigkills_of_its_workers(db_url: str) -> None:
    """Three worker processes; each time another twelfth of the rows is written, one is
    SIGKILLed and another started: ten kills in every phase of the run."""
    with DemoCRM.start(seed=21, **{**SLOW, "latency_ms": 150}) as crm:  # slower listings
        truth = crm.truth()
        total = sum(len(truth[k]["ids"]) - len(truth[k]["malformed"]) for k in KINDS)
        run_id = start_run(db_url, request(crm.url, page_size=50, max_in_flight=6))
        start = lambda: _worker(db_url, crm.api_key)  # noqa: E731
        final = sigkill_mid_run(db_url, run_id, total, start, workers=3, kills=10)
    assert final["state"] == "succeeded", final["error"]
    assert final["tasks_done"] == final["tasks_total"]  # nothing stranded
    check_against_truth(db_url, truth)
    barrier_held(db_url, run_id)
    assert extra_claims(db_url, run_id) <= 10 * LANE_WIDTH


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


def _survives(
    db_url: str, seed: int, disturb: Callable[[Callable[[], dict[str, Any]]], None]
) -> None:
    """Two workers run a migration; ``disturb(progress)`` is called once it wrote 1,000 rows
    (``progress()`` is the run's state). The run must succeed with every row exactly once, and
    both workers live on (a database outage costs a reconnect, not a process)."""
    with DemoCRM.start(seed=seed, **SLOW) as crm:
        workers = [_worker(db_url, crm.api_key) for _ in range(2)]
        try:
            for worker in workers:
                worker.wait_ready()
            run_id = start_run(db_url, request(crm.url, page_size=50, max_in_flight=4))
            wait_for(lambda: state(db_url, run_id)["rows_written"] > 1000, 60, "progress")
            disturb(lambda: state(db_url, run_id))
            final = wait_finished(db_url, run_id, timeout=300)
            truth = crm.truth()
            alive = [proc.proc.poll() is None for proc in workers]
        finally:
            for proc in workers:
                proc.stop()
    assert alive == [True, True]
    assert final["state"] == "succeeded", final["error"]
    assert final["tasks_done"] == final["tasks_total"]
    check_against_truth(db_url, truth)
    barrier_held(db_url, run_id)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_run_survives_a_postgresql_restart(
    restartable: tuple[str, embedded.EmbeddedServer],
) -> None:
    db_url, pg_server = restartable

    def restart_twice(progress: Callable[[], dict[str, Any]]) -> None:
        pg_server.restart()
        wait_for(lambda: progress()["rows_written"] > 3000, 60, "progress after the restart")
        pg_server.restart()

    _survives(db_url, 22, restart_twice)


def crashing(test: Callable[..., None]) -> Callable[..., None]:
    """A slow test run once per way of crashing PostgreSQL: ``pg_ctl -m immediate`` and a
    SIGKILLed postmaster (its ``how`` argument)."""
    marks = (
        pytest.mark.slow,
        pytest.mark.timeout(600),
        pytest.mark.parametrize("how", ["immediate", "sigkill"]),
    )
    for mark in marks:
        test = mark(test)
    return test


def _first_claim_after_return(db_url: str, timeout: float = 60.0) -> float:
    """Seconds from the crashed server's start (its postmaster's, before recovery: an upper
    bound) to the first job claimed after it, on the database's clock."""
    found: list[float] = []

    def claimed() -> bool:
        with connect.connect(db_url) as conn:
            row = conn.execute(
                "SELECT extract(epoch FROM min(claimed_at) - pg_postmaster_start_time())::float8"
                " AS after FROM ferryman_jobs WHERE claimed_at >= pg_postmaster_start_time()"
            ).fetchone()
        if row is None or row["after"] is None:
            return False
        found.append(float(row["after"]))
        return True

    wait_for(claimed, timeout, "a job claimed after PostgreSQL's return")
    return found[0]


@crashing
def test_a_run_survives_a_postgresql_crash(
    restartable: tuple[str, embedded.EmbeddedServer], how: str
) -> None:
    """PostgreSQL crashes (no checkpoint, no flush of the asynchronously committed claims)
    mid-run: the run succeeds with every row exactly once."""
    db_url, pg_server = restartable

    def crash(_: Callable[[], dict[str, Any]]) -> None:
        pg_server.crash(how)
        print(f"\n{how}: first claim {_first_claim_after_return(db_url):.2f} s after return")

    _survives(db_url, 23, crash)


DRAIN = 1500
"""Jobs of each kind in the drained queue."""


@crashing
def test_a_capsule_drain_loses_no_job_in_a_postgresql_crash(
    restartable: tuple[str, embedded.EmbeddedServer], how: str
) -> None:
    """A queue of plain jobs (at least once) and completing() jobs (exactly once), drained by
    two processes while PostgreSQL crashes: every job ends succeeded, each plain one ran at
    least once, each completing() one exactly once."""
    db_url, pg_server = restartable
    with connect.connect(db_url) as conn:
        tj.create_tables(conn)
        plain = enqueue_many([tj.touch.call() for _ in range(DRAIN)], conn=conn)
        exact = enqueue_many([tj.record.call(n=i) for i in range(DRAIN)], conn=conn)
    with subprocesses(db_url, 2, lanes="default:4"):
        wait_for(
            lambda: scalar(db_url, "SELECT count(*) FROM test_runs") > DRAIN // 5, 60, "a fifth"
        )
        pg_server.crash(how)
        print(f"\n{how}: first claim {_first_claim_after_return(db_url):.2f} s after return")
        wait_for(
            lambda: (
                scalar(db_url, "SELECT count(*) FROM ferryman_jobs WHERE status = 'ready'") == 0
            ),
            120,
            "the queue to drain",
        )
    with connect.connect(db_url) as conn:
        statuses = conn.execute(
            "SELECT status, count(*) AS n FROM ferryman_jobs GROUP BY status"
        ).fetchall()
        runs = conn.execute(
            "SELECT count(DISTINCT job_id) AS jobs, count(*) AS rows FROM test_runs"
            " WHERE job_id = ANY(%s)",
            (exact,),
        ).fetchone()
        touched = conn.execute(
            "SELECT count(DISTINCT job_id) AS jobs FROM test_started WHERE job_id = ANY(%s)",
            (plain,),
        ).fetchone()
    assert {row["status"]: row["n"] for row in statuses} == {"succeeded": 2 * DRAIN}
    assert runs is not None and (runs["jobs"], runs["rows"]) == (DRAIN, DRAIN)  # exactly once
    assert touched is not None and touched["jobs"] == DRAIN  # at least once
