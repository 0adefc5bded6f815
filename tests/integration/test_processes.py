"""Several real worker processes on one database: exactly once, crashes, graceful stop."""

from __future__ import annotations

import functools
import time

import ferryman_testjobs as tj
import pytest
from net import wait_for
from workers import Subprocess, scalar, subprocesses

from ferryman_worker.db import connect
from ferryman_worker.queue import enqueue, enqueue_many


def _setup(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        tj.create_tables(conn)


@pytest.mark.slow
def test_ten_thousand_jobs_run_exactly_once_across_three_processes(db_url: str) -> None:
    _setup(db_url)
    with connect.connect(db_url) as conn:
        enqueue_many([tj.record.call(n=i) for i in range(10_000)], conn=conn)
    with subprocesses(db_url, 3, lanes="default:4") as procs:
        wait_for(
            lambda: scalar(db_url, "SELECT count(*) FROM test_runs") >= 10_000, 240, "10,000 runs"
        )
        pids = {p.pid for p in procs}
        for proc in procs:  # stopped, they can land no late duplicate after the count below
            assert proc.terminate() == 0
    assert scalar(db_url, "SELECT count(*) FROM test_runs") == 10_000
    assert scalar(db_url, "SELECT count(DISTINCT job_id) FROM test_runs") == 10_000
    assert scalar(db_url, "SELECT count(*) FROM ferryman_jobs WHERE status = 'succeeded'") == 10_000
    with connect.connect(db_url) as conn:
        used = {r["pid"] for r in conn.execute("SELECT DISTINCT pid FROM test_runs")}
    assert used == pids  # every process took part


def test_more_jobs_run_at_once_than_the_claim_window_every_thread_busy(db_url: str) -> None:
    """Running jobs keep their 'ready' row; they must not stand between a claim and the jobs
    behind them. With a claim window of 4, three processes of 6 threads run 18 jobs at once (a
    scan past running jobs would stop at 4), and every thread stays busy while jobs wait."""
    _setup(db_url)
    window = {"FERRYMAN_CLAIM_WINDOW": "4"}
    with subprocesses(db_url, 3, lanes="default:6", extra_env=window) as procs:
        with connect.connect(db_url) as conn:
            enqueue_many([tj.hold.call(n=i) for i in range(24)], conn=conn)
        wait_for(lambda: _started(db_url) == 18, 20, "18 jobs running at once")
        with connect.connect(db_url) as conn:
            pids = {r["pid"] for r in conn.execute("SELECT DISTINCT pid FROM test_started")}
            assert pids == {p.pid for p in procs}
            conn.execute("INSERT INTO test_release VALUES (true)")
        wait_for(lambda: scalar(db_url, "SELECT count(*) FROM test_runs") == 24, 20, "24 runs")
    assert _started(db_url) == 24
    assert scalar(db_url, "SELECT count(DISTINCT job_id) FROM test_runs") == 24


def _started(db_url: str) -> int:
    return int(scalar(db_url, "SELECT count(*) FROM test_started"))


def test_a_killed_workers_job_runs_again_elsewhere_without_waiting(db_url: str) -> None:
    _setup(db_url)
    with subprocesses(db_url, 1, lanes="default:1") as (victim,):
        with connect.connect(db_url) as conn:
            job_id = enqueue(tj.sleep, 30.0, conn=conn)
        wait_for(
            lambda: scalar(db_url, "SELECT count(*) FROM test_started") == 1, 10, "the job to start"
        )
        with subprocesses(db_url, 1, lanes="default:1") as (rescuer,):
            victim.kill()
            killed = time.monotonic()
            wait_for(
                lambda: scalar(db_url, "SELECT count(*) FROM test_started") == 2,
                15,
                "the job to start again",
                interval=0.01,
            )
            restarted = time.monotonic() - killed
            started_by = scalar(db_url, "SELECT pid FROM test_started ORDER BY at DESC LIMIT 1")
    assert started_by == rescuer.pid
    # well under the poll interval (15 s): the lock went with the connection
    assert restarted < 5.0, restarted
    assert scalar(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", (job_id,)) == "ready"


def test_a_job_that_kills_its_worker_every_time_fails_for_good_after_max_attempts(
    db_url: str,
) -> None:
    _setup(db_url)
    with connect.connect(db_url) as conn:
        job_id = enqueue(tj.crash, conn=conn)  # max_attempts=3
        other = enqueue(tj.record, n=1, conn=conn)
    deaths = 0
    while deaths < 6:  # a new worker each time; the 4th must give up on the job and live
        worker = Subprocess(db_url, "default:1")
        try:
            wait_for(
                functools.partial(_dead_or_failed, worker, db_url, job_id),
                30,
                "the worker to die or the job to fail",
            )
            if worker.proc.poll() is None:  # it gave up on the job, and runs the next one
                wait_for(
                    lambda: scalar(db_url, "SELECT count(*) FROM test_runs") == 1, 30, "the other"
                )
                break
            deaths += 1
        finally:
            worker.stop()
    assert deaths == 3
    assert scalar(db_url, "SELECT count(*) FROM test_started WHERE job_id = %s", (job_id,)) == 3
    with connect.connect(db_url) as conn:
        row = conn.execute(
            "SELECT status, attempts, claims, last_error FROM ferryman_jobs WHERE id = %s",
            (job_id,),
        ).fetchone()
    assert row is not None and row["status"] == "failed" and row["claims"] == 4
    assert "died 3 time(s)" in row["last_error"] and "ferryman jobs retry" in row["last_error"]
    assert scalar(db_url, "SELECT count(*) FROM test_runs WHERE job_id = %s", (other,)) == 1


def _dead_or_failed(worker: Subprocess, db_url: str, job_id: int) -> bool:
    if worker.proc.poll() is not None:
        return True
    return scalar(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", (job_id,)) != "ready"


def test_sigterm_lets_running_jobs_finish_and_claims_nothing_new(db_url: str) -> None:
    _setup(db_url)
    with subprocesses(db_url, 1, lanes="default:2") as (worker,):
        with connect.connect(db_url) as conn:
            enqueue_many([tj.sleep.call(1.5, n=i) for i in range(4)], conn=conn)
        wait_for(lambda: scalar(db_url, "SELECT count(*) FROM test_started") == 2, 10, "two jobs")
        assert worker.terminate() == 0
    assert scalar(db_url, "SELECT count(*) FROM test_runs") == 2
    assert scalar(db_url, "SELECT count(*) FROM ferryman_jobs WHERE status = 'ready'") == 2
    assert scalar(db_url, "SELECT count(*) FROM ferryman_workers") == 0


def test_sigterm_past_the_grace_period_releases_the_running_job(db_url: str) -> None:
    _setup(db_url)
    with subprocesses(
        db_url, 1, lanes="default:1", extra_env={"FERRYMAN_SHUTDOWN_GRACE": "0.5"}
    ) as (worker,):
        with connect.connect(db_url) as conn:
            job_id = enqueue(tj.sleep, 60.0, conn=conn)
        wait_for(lambda: scalar(db_url, "SELECT count(*) FROM test_started") == 1, 10, "the job")
        started = time.monotonic()
        worker.terminate(timeout=20)
        assert time.monotonic() - started < 10
    locks = scalar(
        db_url,
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s",
        (job_id,),
    )
    assert locks == 0
    assert scalar(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", (job_id,)) == "ready"
