"""The capsule's worker in this process: running, waking, lanes, retries, pressure, keys."""

from __future__ import annotations

import itertools
import threading
import time

import ferryman_testjobs as tj
import pytest
from net import wait_for
from workers import in_process, scalar

from ferryman_worker.db import connect
from ferryman_worker.queue import admin, enqueue, enqueue_many


def _setup(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        tj.create_tables(conn)


def _runs(db_url: str) -> int:
    return int(scalar(db_url, "SELECT count(*) FROM test_runs"))


def test_jobs_run_once_and_are_marked_succeeded(db_url: str) -> None:
    """Each job runs once, and no claim outlives its job: while it runs, a job's connection
    holds its own claim's lock only (a lock its predecessor on that connection failed to give
    back would show), and once the lanes are idle, with the pool still open, no lock is held."""
    _setup(db_url)
    with in_process(db_url) as worker, connect.connect(db_url) as conn:
        enqueue_many([tj.locks.call() for _ in range(200)], conn=conn)
        wait_for(lambda: _runs(db_url) == 200, 30, "200 runs")
        lane = worker.lanes["default"]
        wait_for(lambda: lane.waiting == lane.spec.width, 5, "the lanes to go idle")
        wait_for(
            lambda: (
                scalar(db_url, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") == 0
            ),
            5,
            "no advisory lock held",
        )
    assert scalar(db_url, "SELECT count(DISTINCT job_id) FROM test_runs") == 200
    assert scalar(db_url, "SELECT count(*) FROM ferryman_jobs WHERE status = 'succeeded'") == 200
    assert scalar(db_url, "SELECT array_agg(DISTINCT n) FROM test_runs") == [1]


def test_the_notifier_wakes_a_lane_within_milliseconds(db_url: str) -> None:
    _setup(db_url)
    # a poll interval of an hour: only a notification can wake the lane
    with in_process(db_url, poll_interval=3600) as worker, connect.connect(db_url) as conn:
        wait_for(worker.notifier.listening.is_set, 10, "notifier to listen")
        lane = worker.lanes["default"]
        wait_for(lambda: lane.waiting == lane.spec.width, 10, "the lane's threads to sleep")
        started = time.monotonic()
        enqueue(tj.record, n=1, conn=conn)
        wait_for(lambda: _runs(db_url) == 1, 5, "the job", interval=0.002)
        assert time.monotonic() - started < 1.0


def test_the_poller_runs_a_job_nobody_was_notified_of(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No NOTIFY is sent (the trigger is off). The job is enqueued while the lanes sleep after a
    poll: it starts only once a later poll woke them, the poller's or a lane thread's own sleep
    timing out (a poll's time is taken before it wakes anyone, a lane's as it wakes: a job that
    started with neither since the lanes slept was woken by something else)."""
    _setup(db_url)
    with in_process(db_url, poll_interval=1.0) as worker, connect.connect(db_url) as conn:
        conn.execute("ALTER TABLE ferryman_jobs DISABLE TRIGGER ferryman_jobs_notify")
        ticked = threading.Event()
        ticks: list[float] = []
        wake_all = worker.poller.wake_all

        def tick() -> None:
            ticks.append(time.time())
            wake_all()
            ticked.set()

        monkeypatch.setattr(worker.poller, "wake_all", tick)  # observed, still waking
        lane = worker.lanes["default"]
        lane_wait = lane.wait

        def wait(timeout: float) -> None:  # a lane thread also polls when its sleep times out
            began = time.monotonic()
            lane_wait(timeout)
            if time.monotonic() - began >= timeout:
                ticks.append(time.time())

        def asleep() -> bool:  # every thread waits, and no wake-up is pending for them
            return lane.waiting == lane.spec.width and not lane._draining and not lane._credits

        monkeypatch.setattr(lane, "wait", wait)
        ticked.clear()
        assert ticked.wait(30), "no poll"
        wait_for(asleep, 30, "the lane's threads to sleep")
        slept = time.time()
        job_id = enqueue(tj.record, n=1, conn=conn)
        wait_for(lambda: _runs(db_url) == 1, 30, "the poller to run the job")
        started = scalar(
            db_url,
            "SELECT extract(epoch FROM started_at) FROM test_runs WHERE job_id = %s",
            (job_id,),
        )
    woken = [t for t in list(ticks) if slept <= t <= float(started)]
    assert woken, "the job started with no poll since the lanes slept"


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
    """Five attempts with a base of 0.2 s: the delays are 0.1-0.2, 0.2-0.4, 0.4-0.8 and
    0.8-1.6 s (doubling, jittered). A constant delay would keep the last gap near the first."""
    _setup(db_url)
    with in_process(db_url, backoff_base=0.2) as _, connect.connect(db_url) as conn:
        job_id = enqueue(tj.always_fails, conn=conn)
        _wait_failed(db_url, job_id)
        starts = [
            r["t"]
            for r in conn.execute(
                "SELECT extract(epoch FROM at)::float AS t FROM test_started ORDER BY at"
            )
        ]
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(gaps) == 4
    assert 0.1 <= gaps[0] < 0.6 and gaps[3] >= 0.8, gaps
    assert gaps[3] > 2 * gaps[0] and gaps[2] > gaps[0], gaps


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
        wait_for(
            lambda: (
                scalar(
                    db_url,
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE state = 'active' AND query LIKE 'SELECT pg_sleep%%'",
                )
                == 2
            ),
            5,
            "the two sessions to be busy",
        )
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
    """The first attempt writes in completing() and fails before the completion: its write
    rolls back with it. The second writes and completes: both commit, in one transaction."""
    _setup(db_url)
    with in_process(db_url, backoff_base=0.05) as _, connect.connect(db_url) as conn:
        job_id = enqueue(tj.write_then_fail, conn=conn)
        wait_for(
            lambda: (
                scalar(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", (job_id,))
                == "succeeded"
            ),
            10,
            "the job to succeed",
        )
        rows = conn.execute(
            "SELECT r.n, r.xmin::text = j.xmin::text AS one_transaction"
            " FROM test_runs r JOIN ferryman_jobs j ON j.id = r.job_id WHERE j.id = %s",
            (job_id,),
        ).fetchall()
        job = conn.execute(
            "SELECT attempts, last_error FROM ferryman_jobs WHERE id = %s", (job_id,)
        ).fetchone()
    assert rows == [{"n": 1, "one_transaction": True}]  # attempt 1's write is gone
    assert job is not None and job["attempts"] == 2
    assert "failed between the writes and the completion" in job["last_error"]


def test_a_claim_commits_asynchronously_and_the_jobs_own_writes_do_not(db_url: str) -> None:
    """A claim's transaction does not wait for its WAL to reach disk (WAL replays in order:
    a lost claim or success costs at most a rerun); the job's completing() transaction, which
    makes its writes exactly-once, stays synchronous on the same connection."""
    _setup(db_url)
    with connect.connect(db_url) as conn:
        with conn.transaction():
            conn.execute("SELECT * FROM ferryman_claim('no-such-queue', 10)").fetchall()
            claim_mode = conn.execute("SHOW synchronous_commit").fetchone()
        session_mode = conn.execute("SHOW synchronous_commit").fetchone()
    assert claim_mode == {"synchronous_commit": "off"}
    assert session_mode == {"synchronous_commit": "on"}  # local to the claim's transaction
    with in_process(db_url, lanes="default:2") as _, connect.connect(db_url) as conn:
        enqueue_many([tj.commit_mode.call() for _ in range(20)], conn=conn)
        wait_for(lambda: _runs(db_url) == 20, 20, "20 runs")
    assert scalar(db_url, "SELECT array_agg(DISTINCT n) FROM test_runs") == [1]


def test_a_job_whose_connection_is_cut_runs_again_within_seconds(db_url: str) -> None:
    """The server ends the backend of a running job (pg_terminate_backend) while its worker
    lives on: the claim is dead (its row still marked claimed, its lock gone with the backend),
    and the worker's liveness check frees it, so the job runs again without waiting for a poll."""
    _setup(db_url)
    with (
        in_process(db_url, lanes="default:1", poll_interval=3600) as _,
        connect.connect(db_url) as conn,
    ):
        job_id = enqueue(tj.hold, n=1, conn=conn)
        wait_for(lambda: scalar(db_url, "SELECT count(*) FROM test_started") == 1, 10, "the job")
        backend = scalar(db_url, "SELECT claimed_by FROM ferryman_jobs WHERE id = %s", (job_id,))
        conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
        cut = time.monotonic()
        wait_for(
            lambda: scalar(db_url, "SELECT count(*) FROM test_started") == 2,
            10,
            "the job to start again",
            interval=0.02,
        )
        assert time.monotonic() - cut < 5.0
        conn.execute("INSERT INTO test_release VALUES (true)")
        wait_for(lambda: _runs(db_url) == 1, 10, "the job to finish")
        row = conn.execute(
            "SELECT status, claims, claimed_by <> %s AS other FROM ferryman_jobs WHERE id = %s",
            (backend, job_id),
        ).fetchone()
    assert row == {"status": "succeeded", "claims": 2, "other": True}
