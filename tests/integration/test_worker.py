"""The capsule's worker in this process: running, waking, lanes, retries, pressure, keys."""

from __future__ import annotations

import threading
import time

import ferryman_testjobs as tj
from workers import in_process, scalar, wait_for

from ferryman_worker.db import connect
from ferryman_worker.queue import admin, enqueue, enqueue_many


def _setup(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        tj.create_tables(conn)


def _runs(db_url: str) -> int:
    return int(scalar(db_url, "SELECT count(*) FROM test_runs"))


def test_jobs_run_once_and_are_marked_succeeded(db_url: str) -> None:
    _setup(db_url)
    with in_process(db_url) as worker, connect.connect(db_url) as conn:
        enqueue_many([tj.record.call(n=i) for i in range(200)], conn=conn)
        wait_for(lambda: _runs(db_url) == 200, 30, "200 runs")
        assert worker.running == 0
    assert scalar(db_url, "SELECT count(DISTINCT job_id) FROM test_runs") == 200
    assert scalar(db_url, "SELECT count(*) FROM ferryman_jobs WHERE status = 'succeeded'") == 200
    assert scalar(db_url, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") == 0


def test_the_notifier_wakes_a_lane_within_milliseconds(db_url: str) -> None:
    _setup(db_url)
    # a poll interval of an hour: only a notification can wake the lane
    with in_process(db_url, poll_interval=3600) as worker, connect.connect(db_url) as conn:
        wait_for(worker.notifier.listening.is_set, 10, "notifier to listen")
        time.sleep(0.2)  # the lane threads are asleep now
        started = time.monotonic()
        enqueue(tj.record, n=1, conn=conn)
        wait_for(lambda: _runs(db_url) == 1, 5, "the job", interval=0.002)
        assert time.monotonic() - started < 1.0


def test_the_poller_runs_a_job_nobody_was_notified_of(db_url: str) -> None:
    _setup(db_url)
    with in_process(db_url, poll_interval=0.5) as worker, connect.connect(db_url) as conn:
        wait_for(worker.notifier.listening.is_set, 10, "notifier to listen")
        # an insert that bypasses the trigger: no NOTIFY is ever sent
        conn.execute("ALTER TABLE ferryman_jobs DISABLE TRIGGER ferryman_jobs_notify")
        enqueue(tj.record, n=1, conn=conn)
        time.sleep(0.05)
        assert _runs(db_url) == 0
        wait_for(lambda: _runs(db_url) == 1, 5, "the poller to run the job")


def test_a_busy_lane_never_delays_another_lane(db_url: str) -> None:
    _setup(db_url)
    with in_process(db_url, lanes="default:2,critical:1") as _, connect.connect(db_url) as conn:
        enqueue_many([tj.sleep.call(3.0, n=i) for i in range(4)], conn=conn)  # fills default
        wait_for(lambda: scalar(db_url, "SELECT count(*) FROM test_started") == 2, 10, "sleepers")
        started = time.monotonic()
        enqueue(tj.record.call(n=99).with_options(queue="critical"), conn=conn)
        wait_for(
            lambda: scalar(db_url, "SELECT count(*) FROM test_runs WHERE n = 99") == 1,
            5,
            "the critical job",
            interval=0.01,
        )
        assert time.monotonic() - started < 1.0
        assert _runs(db_url) == 1  # no sleeper has finished: default is still full


def test_a_lane_runs_no_more_jobs_at_once_than_its_width(db_url: str) -> None:
    _setup(db_url)
    with in_process(db_url, lanes="default:3") as _, connect.connect(db_url) as conn:
        enqueue_many([tj.sleep.call(0.5, n=i) for i in range(9)], conn=conn)
        wait_for(lambda: _runs(db_url) == 9, 20, "nine sleepers")
    overlap = scalar(
        db_url,
        """
        SELECT max(c) FROM (SELECT (SELECT count(*) FROM test_runs b
                                     WHERE b.started_at <= a.started_at
                                       AND b.finished_at > a.started_at) AS c
                              FROM test_runs a) x""",
    )
    assert overlap == 3


def test_failures_retry_with_backoff_then_fail_and_can_be_retried(db_url: str) -> None:
    _setup(db_url)
    with in_process(db_url, backoff_base=0.05) as _, connect.connect(db_url) as conn:
        ok = enqueue(tj.flaky, fail_times=2, conn=conn)  # succeeds on attempt 3 of 3
        bad = enqueue(tj.flaky, fail_times=5, conn=conn)  # never does
        wait_for(
            lambda: (
                scalar(db_url, "SELECT count(*) FROM ferryman_jobs WHERE status <> 'ready'") == 2
            ),
            20,
            "both jobs to end",
        )
        rows = {
            r["id"]: r
            for r in conn.execute(
                "SELECT id, status, attempts, last_error, last_traceback FROM ferryman_jobs"
            )
        }
        assert rows[ok]["status"] == "succeeded" and rows[ok]["attempts"] == 3
        assert rows[bad]["status"] == "failed" and rows[bad]["attempts"] == 3
        assert "planned failure 3 of 5" in str(rows[bad]["last_error"])
        assert "RuntimeError" in str(rows[bad]["last_traceback"])
        assert [r["id"] for r in admin.failed_jobs(conn)] == [bad]
        assert admin.retry_failed(conn, [bad]) == 1
        wait_for(
            lambda: (
                scalar(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", (bad,)) == "failed"
            ),
            20,
            "the retried job to fail again",
        )
        assert scalar(db_url, "SELECT attempts FROM ferryman_jobs WHERE id = %s", (bad,)) == 3
        assert admin.discard_failed(conn, None) == 1
        assert admin.failed_jobs(conn) == []


def _wait_failed(db_url: str, job_id: int) -> None:
    wait_for(
        lambda: (
            scalar(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", (job_id,)) == "failed"
        ),
        20,
        f"job {job_id} to fail",
    )


def test_an_unretryable_failure_fails_the_job_at_once(db_url: str) -> None:
    _setup(db_url)
    with in_process(db_url, backoff_base=0.05) as _, connect.connect(db_url) as conn:
        job_id = enqueue(tj.hopeless, conn=conn)  # 5 attempts allowed
        _wait_failed(db_url, job_id)
        row = conn.execute(
            "SELECT attempts, last_error, last_traceback FROM ferryman_jobs WHERE id = %s",
            (job_id,),
        ).fetchone()
    assert row is not None and row["attempts"] == 1
    assert row["last_error"].startswith("Unretryable: the thing this job needs does not exist")
    assert "LookupError" in row["last_traceback"]


def test_backoff_grows_between_attempts(db_url: str) -> None:
    _setup(db_url)
    with in_process(db_url, backoff_base=0.2) as _, connect.connect(db_url) as conn:
        job_id = enqueue(tj.flaky, fail_times=5, conn=conn)
        _wait_failed(db_url, job_id)
    # attempts at t0, t0 + 0.1..0.2, then + 0.2..0.4: the whole run took at least 0.3 s
    elapsed = scalar(
        db_url,
        "SELECT extract(epoch FROM finished_at - created_at) FROM ferryman_jobs WHERE id = %s",
        (job_id,),
    )
    assert float(elapsed) >= 0.3


def test_an_unknown_job_name_fails_with_a_clear_error(db_url: str) -> None:
    with in_process(db_url) as _, connect.connect(db_url) as conn:
        conn.execute(
            "INSERT INTO ferryman_jobs (queue, name, max_attempts) VALUES"
            " ('default', 'nobody.registered.this', 1)"
        )
        wait_for(lambda: admin.failed_jobs(conn), 10, "the job to fail")
        assert "--import" in str(admin.failed_jobs(conn)[0]["last_error"])


def test_pressure_defers_a_job_without_running_it(db_url: str) -> None:
    _setup(db_url)
    # threshold 1 with a second session busy in pg_sleep: the database is "under pressure"
    with connect.connect(db_url) as busy, connect.connect(db_url) as busy2:
        sleeper = threading.Thread(target=lambda: busy.execute("SELECT pg_sleep(4)"))
        sleeper2 = threading.Thread(target=lambda: busy2.execute("SELECT pg_sleep(4)"))
        sleeper.start()
        sleeper2.start()
        time.sleep(0.2)
        with (
            in_process(db_url, pressure_threshold=1, backoff_base=0.2) as _,
            connect.connect(db_url) as conn,
        ):
            job_id = enqueue(tj.pressured, conn=conn)
            wait_for(
                lambda: (
                    scalar(db_url, "SELECT deferrals FROM ferryman_jobs WHERE id = %s", (job_id,))
                    >= 1
                ),
                10,
                "a deferral",
            )
            assert _runs(db_url) == 0
            assert (
                scalar(db_url, "SELECT attempts FROM ferryman_jobs WHERE id = %s", (job_id,)) == 0
            )
            sleeper.join()
            sleeper2.join()
            wait_for(lambda: _runs(db_url) == 1, 20, "the job to run once pressure is gone")


def test_jobs_with_one_concurrency_key_never_overlap(db_url: str) -> None:
    _setup(db_url)
    with in_process(db_url, lanes="default:4") as _, connect.connect(db_url) as conn:
        enqueue_many(
            [tj.sleep.call(0.3, n=i).with_options(concurrency_key="tenant-1") for i in range(4)],
            conn=conn,
        )
        wait_for(lambda: _runs(db_url) == 4, 20, "four keyed jobs")
    overlapping = scalar(
        db_url,
        """
        SELECT count(*) FROM test_runs a JOIN test_runs b ON a.job_id < b.job_id
         WHERE a.started_at < b.finished_at AND b.started_at < a.finished_at""",
    )
    assert overlapping == 0


def test_a_job_that_completes_in_its_own_transaction_commits_writes_and_completion_together(
    db_url: str,
) -> None:
    _setup(db_url)
    with in_process(db_url) as _, connect.connect(db_url) as conn:
        job_id = enqueue(tj.record, n=5, conn=conn)
        wait_for(lambda: _runs(db_url) == 1, 10, "the job")
        row = conn.execute(
            "SELECT j.finished_at, r.finished_at AS wrote FROM ferryman_jobs j"
            " JOIN test_runs r ON r.job_id = j.id WHERE j.id = %s",
            (job_id,),
        ).fetchone()
    assert row is not None
    # now() in the completion is the transaction's start; the write's clock_timestamp is later
    assert row["finished_at"] <= row["wrote"]  # type: ignore[operator]
