"""When seeding the next phase at the barrier fails: refused for good, the run fails at once,
naming the phase and the database's words, and a retry after the fix finishes it with every row
once; a lost connection at the same point is tried again, and the run succeeds.

Both with a real PostgreSQL, the demo CRM and a real run of deals (one page, four windows) then
their messages (a tree kind: its tasks are seeded from the deals written)."""

from __future__ import annotations

import pathlib
import signal
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from migration import (
    barrier_held,
    check_against_truth,
    crashing_worker,
    credential,
    engine_worker,
    request,
    start_run,
    stopped_at,
    task_jobs,
    wait_finished,
)
from net import wait_for
from tests.democrm.server_fixture import DemoCRM
from workers import scalar

from ferryman_worker.db import connect
from ferryman_worker.engine import runs
from ferryman_worker.reaper import sweep_engine

DATASET: dict[str, Any] = {
    "organizations": 1,
    "people": 1,
    "deals": 40,
    "messages_per_deal": 2,
    "malformed_rate": 0.0,
}
ROLE = "ferryman_barrier_worker"


def _deals_then_messages(url: str) -> Any:
    """Phase 0: the deals, one task of one page, written in four windows of 10; phase 1: their
    messages, seeded at the barrier."""
    return request(url, kinds=["deals", "messages"], stripes=1, page_size=100, window_size=10)


@pytest.fixture
def worker_role(db_url: str) -> Iterator[str]:
    """The URL of a role with the workers' grants of docs/security.md, and CREATE on the schema
    (a worker's start-up check of the schema runs ``CREATE TABLE IF NOT EXISTS``)."""
    with connect.connect(db_url) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {ROLE}")
        admin.execute(f"CREATE ROLE {ROLE} LOGIN")
        admin.execute(f"GRANT USAGE, CREATE ON SCHEMA public TO {ROLE}")
        admin.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {ROLE}"
        )
        admin.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {ROLE}")
        admin.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {ROLE}")
    try:
        yield psycopg.conninfo.make_conninfo(db_url, user=ROLE)
    finally:
        with connect.connect(db_url) as admin:
            admin.execute(f"DROP OWNED BY {ROLE}")
            admin.execute(f"DROP ROLE {ROLE}")


def _written_once(db_url: str, kind: str, table: str) -> int:
    """How many rows of ``kind`` the destination holds: each source row once, each with its
    ledger slot."""
    with connect.connect(db_url) as conn:
        row = conn.execute(
            f"SELECT count(*) AS n, count(DISTINCT source_id) AS ids FROM {table}"  # type: ignore[arg-type]
        ).fetchone()
        ledger = conn.execute(
            "SELECT count(*) AS n FROM ferryman_ledger WHERE kind = %s", (kind,)
        ).fetchone()
    assert row is not None and ledger is not None
    assert row["n"] == row["ids"] == ledger["n"], f"{kind}: written twice, or without its slot"
    return int(row["n"])


@pytest.mark.slow
def test_seeding_refused_for_good_fails_the_run_at_once_and_a_retry_after_the_fix_finishes_it(
    db_url: str, worker_role: str
) -> None:
    """The real event: between the phases, the database's owner revokes the workers' INSERT on
    ``ferryman_tasks`` (a hardening of grants, say). The deals walk needs no new task (one page),
    so phase 0 runs to its end; the barrier's seeding of the messages is refused (42501) every
    time. The run fails on the first attempt, naming the phase, its kind and the refusal; the
    deals' last window, written with the barrier, is rolled back with it. Once the grant is back,
    ``ferryman retry`` finishes the run with every row once."""
    with DemoCRM.start(seed=51, **DATASET) as crm:
        run_id = start_run(db_url, _deals_then_messages(crm.url))  # as the owner: phase 0 seeded
        with connect.connect(db_url) as admin:
            admin.execute(f"REVOKE INSERT ON ferryman_tasks FROM {ROLE}")
        with credential(crm.api_key), engine_worker(worker_role, lanes="migrations:2"):
            failed = wait_finished(db_url, run_id, timeout=120)
            assert failed["state"] == "failed"
            assert "seeding phase 1 (messages)" in failed["error"]
            assert "42501 permission denied for table ferryman_tasks" in failed["error"]
            assert "ferryman retry" in failed["error"]
            [job] = task_jobs(db_url)  # one task job: the deals', failed on its first attempt
            assert (job["status"], job["attempts"]) == ("failed", 1)
            assert failed["phase"] == 0  # the barrier rolled back: no phase 1, no message task
            assert scalar(db_url, "SELECT count(*) FROM ferryman_tasks WHERE phase = 1") == 0
            assert _written_once(db_url, "deals", "crm_deals") == 30  # all windows but the last

            with connect.connect(db_url) as admin:
                admin.execute(f"GRANT INSERT ON ferryman_tasks TO {ROLE}")
                assert runs.retry(admin, run_id) == 1
            final = wait_finished(db_url, run_id, timeout=120)
        truth = crm.truth()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("deals", "messages"))
    barrier_held(db_url, run_id)


@pytest.mark.slow
def test_a_statement_cancelled_at_the_barrier_is_tried_again_and_the_run_succeeds(
    db_url: str, tmp_path: pathlib.Path
) -> None:
    """A transient refusal at the same point, on a connection that stays up: the worker stops
    itself at the barrier (the phase found closed, the run row locked, the deals' last window
    not committed); another session takes ferryman_row_errors for itself (``LOCK TABLE``, as a
    ``VACUUM FULL`` would), so the barrier's statement reading it waits, and is cancelled there
    (``pg_cancel_backend``, as a statement timeout or an administrator would: 57014). The job
    tries again once the lock is gone, and the run succeeds with every row once. (A connection
    lost at the barrier is ``test_reaper``'s barrier winner killed, and ``test_restart``'s.)"""
    with DemoCRM.start(seed=52, **DATASET) as crm:
        run_id = start_run(db_url, _deals_then_messages(crm.url))
        log = tmp_path / "stops"
        proc = crashing_worker(db_url, crm.api_key, "", "migrations:1", "barrier", log)
        try:
            wait_for(lambda: stopped_at(proc, log, "barrier"), 60, "a stop at the barrier")
            with connect.connect(db_url, autocommit=False) as locker:
                locker.execute("LOCK TABLE ferryman_row_errors IN ACCESS EXCLUSIVE MODE")
                proc.proc.send_signal(signal.SIGCONT)
                wait_for(lambda: _seeding_waits(db_url), 60, "the barrier to wait on the lock")
                assert scalar(db_url, _CANCEL_SEEDING) == 1
                wait_for(lambda: task_jobs(db_url)[0]["attempts"] == 1, 60, "a failed attempt")
                locker.rollback()
            final = wait_finished(db_url, run_id, timeout=120)
            truth = crm.truth()
        finally:
            proc.proc.send_signal(signal.SIGCONT)
            proc.stop()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("deals", "messages"))
    barrier_held(db_url, run_id)
    [deals, *_] = task_jobs(db_url)  # the deals' job, tried again after the cancel
    assert (deals["status"], deals["attempts"]) == ("succeeded", 2)
    assert deals["last_error"].startswith("QueryCanceled")


def test_a_phase_the_reaper_cannot_seed_for_good_fails_its_run_and_its_sweeps_go_on(
    db_url: str, worker_role: str
) -> None:
    """The reaper's sweep of phases closed without a winner, with the seeding refused for good:
    the run fails, naming the phase, and the sweeps after it still run (before, the error ended
    every reap). The phase closed without a winner is forged (a task's finish and the barrier are
    one transaction: ``test_reaper``); the refusal is real, the workers' INSERT on
    ``ferryman_tasks`` revoked (the reaper runs as the workers' role)."""
    with connect.connect(db_url) as admin:
        run = runs.admit(admin, _deals_then_messages("http://127.0.0.1:1"))
        runs.start(admin, run)
        admin.execute("UPDATE ferryman_tasks SET status = 'done'")  # forged: phase 0 closed
        admin.execute(f"REVOKE INSERT ON ferryman_tasks FROM {ROLE}")
    with connect.connect(worker_role) as reaper:
        sweeps = sweep_engine(reaper, stale_after=1800)
        failed = runs.progress(reaper, run["id"])[0]
    assert (sweeps.failed_runs, sweeps.advanced) == (1, 0)
    assert failed["state"] == "failed" and failed["phase"] == 0
    assert "seeding phase 1 (messages)" in failed["error"]
    assert "42501 permission denied for table ferryman_tasks" in failed["error"]


_SEEDING = (
    "FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    " AND query LIKE '%%ferryman_row_errors%%'"
)
"""The barrier's statement waiting on the lock of ferryman_row_errors: the count of the closing
phase's refusals (its kinds' verdicts), which comes first, or the seeding of the next phase."""
_CANCEL_SEEDING = f"SELECT count(pg_cancel_backend(pid)) {_SEEDING}"


def _seeding_waits(db_url: str) -> bool:
    return bool(scalar(db_url, f"SELECT count(*) {_SEEDING}"))
