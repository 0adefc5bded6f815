"""A namespace's share of the workers: one namespace with many runs queued does not starve
another's run. Real ``ferryman worker`` processes, the demo CRM over real HTTP; the order of
claims is read from the jobs' claim marks, which a finished job keeps."""

from __future__ import annotations

from typing import Any

import pytest
from migration import SECRET, request, start_run
from net import wait_for
from tests.democrm.server_fixture import DemoCRM
from workers import Subprocess, scalar

from ferryman_worker.db import connect
from ferryman_worker.engine.runtime import credential_env_var
from ferryman_worker.queue import JobCall, JobOptions, claims, enqueue_many

THREADS = 2
"""Lane threads of the worker; claims this many apart may be taken at the same moment."""
CLAIMS = 8
"""Claims read once the worker has taken them."""


def _claims(db_url: str) -> list[int]:
    """The run id of each task job claimed so far, in the order of the claims."""
    with connect.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT (args->>1)::bigint AS run_id FROM ferryman_jobs"
            " WHERE name = 'ferryman.task' AND claimed_at IS NOT NULL ORDER BY claimed_at, id"
        ).fetchall()
    return [int(row["run_id"]) for row in rows]


def _queue(db_url: str, url: str, name: str, workspace: str) -> int:
    return start_run(
        db_url,
        request(
            url,
            name=name,
            workspace=workspace,
            kinds=["organizations"],
            max_in_flight=2,
            stripes=2,
            page_size=100,
        ),
    )


def _claimed_in_order(db_url: str, crm: DemoCRM, a_runs: int) -> tuple[list[int], int]:
    """``a_runs`` runs of namespace team-a queued, then one of team-b; a worker started after
    them; the first CLAIMS claims and team-b's run id."""
    for i in range(a_runs):
        _queue(db_url, crm.url, f"team-a/run-{i}", f"a-{i}")
    b_run = _queue(db_url, crm.url, "team-b/run-1", "b-1")
    env: dict[str, Any] = {credential_env_var(SECRET["name"], SECRET["key"]): crm.api_key}
    worker = Subprocess(db_url, f"migrations:{THREADS}", env)
    try:
        claimed = "SELECT count(*) FROM ferryman_jobs WHERE claimed_at IS NOT NULL"
        wait_for(lambda: scalar(db_url, claimed) >= CLAIMS, 120, f"{CLAIMS} claims")
    finally:
        worker.stop()
    return _claims(db_url)[:CLAIMS], b_run


@pytest.mark.timeout(240)
def test_fifty_runs_of_one_namespace_do_not_starve_another_namespaces_run(db_url: str) -> None:
    with DemoCRM.start(seed=5, organizations=2000, people=0, deals=0) as crm:
        claims, b_run = _claimed_in_order(db_url, crm, a_runs=50)
    # team-a's 100 jobs were queued first: in the order of enqueue team-b would wait for them
    first_b = claims.index(b_run) if b_run in claims else None
    assert first_b is not None and first_b <= THREADS, claims
    assert claims.count(b_run) >= CLAIMS // 2 - THREADS, claims  # about half, not one claim


def _jobs(conn: connect.Connection, tenant: str, count: int, priority: int = 0) -> list[int]:
    options = JobOptions(queue="fair", tenant=tenant, priority=priority)
    return enqueue_many([JobCall("fair.job", (), {}, options)] * count, conn=conn)


def _claim_on_new_connections(db_url: str, count: int) -> list[int]:
    """``count`` claims, each on a connection of its own that keeps it (as a lane thread's
    connection does while its job runs): the ids claimed, in order."""
    taken: list[int] = []
    held = [connect.connect(db_url) for _ in range(count)]
    try:
        for conn in held:
            job = claims.claim(conn, "fair", window=10)
            assert job is not None
            taken.append(job.id)
    finally:
        for conn in held:
            conn.close()
    return taken


def test_a_claim_serves_the_tenant_with_the_fewest_running_jobs_in_order_within_it(
    db_url: str,
) -> None:
    with connect.connect(db_url) as conn:
        a = _jobs(conn, "team-a", 6)
        b = _jobs(conn, "team-b", 2)
        c = _jobs(conn, "", 1)
    # the oldest first while each has none running, then whoever runs fewest
    assert _claim_on_new_connections(db_url, 9) == [a[0], b[0], c[0], a[1], b[1], *a[2:]]


def test_a_higher_priority_comes_before_a_tenants_turn(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        a = _jobs(conn, "team-a", 2)
        b = _jobs(conn, "team-b", 1)
        urgent = _jobs(conn, "team-a", 1, priority=5)
    assert _claim_on_new_connections(db_url, 4) == [urgent[0], b[0], a[0], a[1]]


def test_a_tenants_finished_job_no_longer_counts_against_its_turn(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        a = _jobs(conn, "team-a", 3)
        b = _jobs(conn, "team-b", 2)
    with connect.connect(db_url) as first, connect.connect(db_url) as second:
        on_first, on_second = claims.claim(first, "fair", 10), claims.claim(second, "fair", 10)
        assert on_first is not None and on_second is not None
        assert [on_first.id, on_second.id] == [a[0], b[0]]
        # b[0] succeeds with the next claim: team-a runs one, team-b none, so team-b's turn
        done = claims.Finished(on_second, left_batch=False, succeed=True)
        after = claims.claim(second, "fair", 10, previous=done)
    assert after is not None and after.id == b[1]
