"""The reaper repairs each stall it exists for, and changes nothing when nothing is stalled.

Each sweep is tested with the stall caused for real (a failing source, worker processes SIGKILLed
or SIGSTOPped at the right moment, a barrier winner killed in its last transaction), then swept
for real. A test that forges a stall in SQL says why no real event produces that state."""

from __future__ import annotations

import pathlib
import signal
import time
from typing import Any

import psycopg
import pytest
from migration import (
    barrier_held,
    check_against_truth,
    crashing_worker,
    credential,
    engine_worker,
    ready_task_jobs,
    request,
    start_run,
    state,
    stopped_at,
    task_jobs,
    wait_finished,
)
from net import wait_for
from psycopg.types.json import Jsonb
from tests.democrm.server_fixture import DemoCRM
from workers import Subprocess, scalar

from ferryman_worker.db import connect, queries
from ferryman_worker.engine import runs, windows
from ferryman_worker.engine.schedule import enqueue_tasks
from ferryman_worker.queue import admin
from ferryman_worker.reaper import EngineSweeps, reap, sweep_engine
from ferryman_worker.settings import Settings


def _started(conn: connect.Connection) -> dict[str, Any]:
    run = runs.admit(conn, request("http://127.0.0.1:1"))
    runs.start(conn, run)
    return run


def _tasks(conn: connect.Connection) -> list[dict[str, Any]]:
    return conn.execute(
        "SELECT id, phase, status, job_id FROM ferryman_tasks ORDER BY id"
    ).fetchall()


def _jobs(conn: connect.Connection) -> int:
    row = conn.execute("SELECT count(*) AS n FROM ferryman_jobs WHERE status = 'ready'").fetchone()
    return int(row["n"]) if row else 0


def test_nothing_stalled_means_nothing_done(conn: connect.Connection) -> None:
    _started(conn)
    lines = reap(conn, Settings())
    assert lines[:6] == [
        "tasks whose job failed for good: 0 task(s) failed",
        "dead or stale task claims: 0 task(s) released",
        "runs whose heartbeat stopped: 0 run(s) stalled, 0 task(s) that had lost their job"
        " requeued",
        "failed tasks: 0 run(s) marked failed",
        "phases closed without a winner: 0 run(s) advanced",
        "runs below their in-flight limit: 0 run(s) refilled, 0 task(s) queued",
    ]


def test_a_dead_claim_is_released_and_the_task_queued_again(conn: connect.Connection) -> None:
    _started(conn)
    first = _tasks(conn)[0]["id"]
    # Forged: job 999 does not exist. Prune deletes finished jobs only, and in the same reap
    # after this sweep released any task they left running: only a hand deletes the job of a
    # running task. The real "job is over" is a discarded job, in
    # test_a_task_whose_job_was_discarded_after_the_queue_gave_up_is_released_and_finishes.
    conn.execute(
        "UPDATE ferryman_tasks SET status = 'running', job_id = 999 WHERE id = %s", (first,)
    )
    sweeps = sweep_engine(conn, stale_after=1800)
    assert (sweeps.released, sweeps.queued) == (1, 1)
    assert _tasks(conn)[0]["status"] == "queued"
    assert sweep_engine(conn, stale_after=1800).released == 0


def test_a_live_claim_is_kept_until_it_is_stale_then_fenced_out(
    db_url: str, conn: connect.Connection
) -> None:
    _started(conn)
    first = _tasks(conn)[0]["id"]
    # Forged, to reach the fence with an exact job id; the real hang is
    # test_a_hung_worker_loses_its_tasks_once_stale_and_is_fenced_out_when_it_wakes.
    with connect.connect(db_url) as claimer:
        claimer.execute("SELECT pg_advisory_lock(4242::bigint)")  # job 4242 is alive
        conn.execute(
            "UPDATE ferryman_tasks SET status = 'running', job_id = 4242,"
            " heartbeat_at = now() WHERE id = %s",
            (first,),
        )
        conn.execute(  # its job, ready (running), in no lane any worker serves
            "INSERT INTO ferryman_jobs (id, queue, name) VALUES (4242, 'nowhere', 'x')"
        )
        assert sweep_engine(conn, stale_after=1800).released == 0
        conn.execute(
            "UPDATE ferryman_tasks SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
            (first,),
        )
        assert sweep_engine(conn, stale_after=1800).released == 1
        with pytest.raises(psycopg.Error) as refused:  # the stale claimer's next window
            claimer.execute(
                queries.engine("close_window"),
                {
                    "task_id": first,
                    "job_id": 4242,
                    "run_id": 1,
                    "kind": "organizations",
                    "offset": 25,
                    "written": 25,
                    "skipped": 0,
                    "matched": 0,
                    "errors": Jsonb([]),
                    "commit": None,
                },
            )
    assert refused.value.sqlstate == windows.GATE_CLOSED  # the task is no longer its own


def test_a_run_below_its_in_flight_limit_is_refilled(conn: connect.Connection) -> None:
    _started(conn)
    # Forged: the enqueue was lost (tasks pending, no jobs). Every path that makes a task
    # pending queues it in the same transaction; the real refill follows a release, in
    # test_a_hung_worker_loses_its_tasks_once_stale_and_is_fenced_out_when_it_wakes.
    conn.execute("UPDATE ferryman_tasks SET status = 'pending'")
    conn.execute("DELETE FROM ferryman_jobs")
    sweeps = sweep_engine(conn, stale_after=1800)
    assert (sweeps.refilled_runs, sweeps.queued) == (1, 4)
    assert _jobs(conn) == 4
    assert {t["status"] for t in _tasks(conn)} == {"queued"}


def test_a_phase_closed_without_a_winner_is_advanced(conn: connect.Connection) -> None:
    run = _started(conn)
    # Forged: a task's finish, the barrier and the next phase's seeding are one transaction, so
    # a winner that dies leaves nothing closed (test_a_barrier_winner_killed_...); this guards
    # the sweep against a state only a bug or a hand edit makes.
    conn.execute("UPDATE ferryman_tasks SET status = 'done'")
    sweeps = sweep_engine(conn, stale_after=1800)
    assert sweeps.advanced == 1
    assert runs.lock(conn, run["id"])["phase"] == 1
    people = [t for t in _tasks(conn) if t["phase"] == 1]
    assert len(people) == 4 and {t["status"] for t in people} == {"queued"}


def test_the_last_phase_closed_without_a_winner_finishes_the_run(conn: connect.Connection) -> None:
    run = _started(conn)
    conn.execute("UPDATE ferryman_runs SET phase = 3")  # forged, as above
    conn.execute("UPDATE ferryman_tasks SET status = 'done'")
    assert sweep_engine(conn, stale_after=1800).advanced == 1
    assert runs.lock(conn, run["id"])["state"] == "succeeded"


def test_a_run_whose_heartbeat_stopped_gets_new_jobs_for_queued_tasks_whose_jobs_are_gone(
    conn: connect.Connection,
) -> None:
    run = _started(conn)
    # Forged: no ferryman command deletes a ready job; a hand (or a restore of the jobs table)
    # can. A run whose workers all died keeps its jobs: test_a_run_whose_workers_all_died_...
    conn.execute(
        "DELETE FROM ferryman_jobs WHERE args = jsonb_build_array(%s::bigint, %s::bigint)",
        (_tasks(conn)[0]["id"], run["id"]),
    )
    assert sweep_engine(conn, stale_after=1800).stalled_runs == 0  # not yet: it may be busy
    conn.execute("UPDATE ferryman_runs SET heartbeat_at = now() - interval '1 hour'")
    sweeps = sweep_engine(conn, stale_after=1800)
    assert (sweeps.stalled_runs, sweeps.requeued, sweeps.queued) == (1, 1, 1)
    assert _jobs(conn) == 4 and {t["status"] for t in _tasks(conn)} == {"queued"}
    renewed = runs.lock(conn, run["id"])["heartbeat_at"]
    assert renewed >= run["heartbeat_at"]  # not the hour-old beat any more
    assert sweep_engine(conn, stale_after=1800).stalled_runs == 0  # the heartbeat was renewed


def test_a_run_whose_failed_task_did_not_fail_it_is_failed(conn: connect.Connection) -> None:
    """Forged, because no real event leaves a failed task in a running run: every write that
    fails a task fails its run in the same commit. A job fails its task in ``tasks._fail``:
    fail_task and finish_run in one ``conn.transaction()`` (a worker killed between them leaves
    neither: test_a_worker_killed_between_failing_a_task_and_failing_its_run_leaves_neither_failed;
    a database restart aborts the open transaction the same way, and asynchronous commit loses
    whole transactions only). The reaper fails a task whose job failed for good together with
    its run in one statement (fail_tasks_of_failed_jobs in db/sql/engine.sql). The only write
    that makes a failed run running again, ``runs.retry``, reopens every failed task of it in
    the same transaction (reopen_run, reopen_tasks). This test guards the sweep alone, against a
    hand edit or a future writer that breaks that rule."""
    run = _started(conn)
    conn.execute(
        "UPDATE ferryman_tasks SET status = 'failed', error = 'HTTP 401'"
        " WHERE id = (SELECT min(id) FROM ferryman_tasks)"
    )
    assert sweep_engine(conn, stale_after=1800).failed_runs == 1
    final = runs.lock(conn, run["id"])
    assert final["state"] == "failed" and "HTTP 401" in final["error"]


# -- real stalls ----------------------------------------------------------------------------------

SMALL: dict[str, Any] = {"people": 0, "deals": 0, "malformed_rate": 0.0}


def _died(proc: Subprocess, timeout: float = 30) -> None:
    wait_for(lambda: proc.proc.poll() is not None, timeout, f"worker {proc.pid} to kill itself")
    assert proc.proc.returncode == -signal.SIGKILL
    proc.stop()


def _other_backends(db_url: str) -> int:
    """Backends of this test's database besides the one asking."""
    return int(
        scalar(
            db_url,
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()",
        )
    )


def _sweep(db_url: str, stale_after: float = 1800) -> EngineSweeps:
    with connect.connect(db_url) as conn:
        return sweep_engine(conn, stale_after)


def _task_rows(db_url: str) -> list[dict[str, Any]]:
    with connect.connect(db_url) as conn:
        return conn.execute(
            "SELECT id, phase, cursor_key, status, job_id, attempts FROM ferryman_tasks ORDER BY id"
        ).fetchall()


@pytest.mark.slow
def test_a_suspend_and_resume_within_one_window_write_the_window_again(
    db_url: str, tmp_path: pathlib.Path
) -> None:
    """The gate refuses a window because the run is suspended, and the run is resumed before
    the job looks at its run (``Scope.commit_window`` then ``Scope.gate``). The task is still
    this job's, so the job writes the same window again and walks on: the run succeeds with no
    sweep. (Before, the job took the refusal for a lost claim and succeeded with its task
    stranded, running and its own, until the dead-claim sweep released it.)"""
    with DemoCRM.start(seed=38, organizations=200, **SMALL) as crm:
        run_id = start_run(
            db_url,
            request(crm.url, kinds=["organizations"], stripes=1, page_size=100, window_size=25),
        )
        log = tmp_path / "stops"
        proc = crashing_worker(db_url, crm.api_key, "", "migrations:1", "walk,gate", log)
        try:
            wait_for(lambda: stopped_at(proc, log, "walk"), 30, "a stop as its walk starts")
            with connect.connect(db_url) as conn:
                assert runs.suspend(conn, run_id)
            proc.proc.send_signal(signal.SIGCONT)  # its first window is refused: suspended
            wait_for(lambda: stopped_at(proc, log, "gate"), 30, "a stop at the gate")
            with connect.connect(db_url) as conn:
                assert runs.resume(conn, run_id) == []  # its task is running: nothing to queue
            proc.proc.send_signal(signal.SIGCONT)
            final = wait_finished(db_url, run_id, timeout=60)
            truth = crm.truth()
        finally:
            proc.proc.send_signal(signal.SIGCONT)
            proc.stop()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("organizations",))
    tasks = _task_rows(db_url)
    assert [(t["status"], t["attempts"]) for t in tasks] == [("done", 1)] * len(tasks)
    assert {j["status"] for j in task_jobs(db_url)} == {"succeeded"}  # none released


@pytest.mark.slow
def test_a_worker_killed_between_failing_a_task_and_failing_its_run_leaves_neither_failed(
    db_url: str,
) -> None:
    """Why the stand-alone failed-task sweep (a failed task in a running run) has only a forged
    test: the one place a job fails its task, ``tasks._fail``, fails the task and the run in one
    ``conn.transaction()``; a worker SIGKILLed between the two statements (a crash hook) leaves
    neither failed, and the same job, run again, fails both."""
    with DemoCRM.start(seed=39, organizations=40, **SMALL) as crm:
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"], stripes=1))
        _died(crashing_worker(db_url, "a-wrong-key", "fail"))  # HTTP 401: the task fails at once
        (task,) = _task_rows(db_url)
        assert (task["status"], task["attempts"]) == ("running", 1)  # its failure rolled back
        assert state(db_url, run_id)["state"] == "running"
        sweeps = _sweep(db_url)
        assert (sweeps.failed_tasks, sweeps.failed_runs, sweeps.released, sweeps.queued) == (
            0,
            0,
            0,
            0,
        )
        with credential("a-wrong-key"), engine_worker(db_url):  # the same job takes it back
            final = wait_finished(db_url, run_id, timeout=60)
    assert final["state"] == "failed" and "HTTP 401" in final["error"]
    (task,) = _task_rows(db_url)
    assert (task["status"], task["attempts"]) == ("failed", 2)
    assert [j["status"] for j in task_jobs(db_url)] == ["failed"]
    assert _sweep(db_url).failed_runs == 0


@pytest.mark.slow
def test_a_task_waiting_out_its_backoff_keeps_its_job_attempts_and_backoff(db_url: str) -> None:
    with (
        DemoCRM.start(seed=31, organizations=40, error_rate=1.0, **SMALL) as crm,
        credential(crm.api_key),
        engine_worker(db_url, backoff_base=10.0),
    ):
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"], stripes=1))
        wait_for(lambda: task_jobs(db_url)[0]["attempts"] == 1, 60, "a failed attempt")
        (waiting,) = task_jobs(db_url)
        (task,) = _task_rows(db_url)
        sweeps = [_sweep(db_url), _sweep(db_url, stale_after=0.001)]  # however stale it looks
        assert [(s.released, s.failed_tasks, s.queued) for s in sweeps] == [(0, 0, 0)] * 2
        assert task_jobs(db_url) == [waiting]  # same job, attempt count and next try
        assert _task_rows(db_url) == [task] and task["status"] == "running"
        assert task["job_id"] == waiting["id"] and task["attempts"] == 1
        crm.configure(error_rate=0.0)
        final = wait_finished(db_url, run_id, timeout=60)
        truth = crm.truth()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("organizations",))
    assert [(j["id"], j["status"], j["attempts"]) for j in task_jobs(db_url)] == [
        (waiting["id"], "succeeded", 2)  # one failed attempt, one that succeeded
    ]
    assert _task_rows(db_url)[0]["attempts"] == 2  # the same task, claimed twice by one job


def _queue_gives_up_on_the_task_job(db_url: str, run_id: int, api_key: str) -> dict[str, Any]:
    """The run's one task job kills its worker twice (a crash hook as its walk starts), and the
    queue gives up on it (ProcessDied) with nothing failing its task. Returns the job."""
    with connect.connect(db_url) as conn:
        # Shortens the queue's patience from 25 claims to 2; the deaths below are real.
        conn.execute("UPDATE ferryman_jobs SET max_attempts = 2")
    for _ in range(2):
        _died(crashing_worker(db_url, api_key, "walk"))
    with credential(api_key), engine_worker(db_url):  # the queue gives up on the job
        wait_for(lambda: task_jobs(db_url)[0]["status"] == "failed", 30, "ProcessDied")
    (job,) = task_jobs(db_url)
    assert "ProcessDied" in job["last_error"]
    assert _task_rows(db_url)[0]["status"] == "running"  # nothing failed it yet
    assert state(db_url, run_id)["state"] == "running"
    return job


@pytest.mark.slow
def test_a_task_whose_job_was_discarded_after_the_queue_gave_up_is_released_and_finishes(
    db_url: str,
) -> None:
    """The other real task whose job is over without ending it: a user discards the failed job
    (``ferryman jobs discard``) before the reaper failed its task. A discarded job is over, so
    the dead-claim sweep releases the task and the refill gives it a new job."""
    with DemoCRM.start(seed=40, organizations=10, **SMALL) as crm:
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"], stripes=1))
        job = _queue_gives_up_on_the_task_job(db_url, run_id, crm.api_key)
        with connect.connect(db_url) as conn:
            assert admin.discard_failed(conn, [job["id"]]) == 1  # what the command runs
        sweeps = _sweep(db_url)
        assert (sweeps.failed_tasks, sweeps.released, sweeps.refilled_runs, sweeps.queued) == (
            0,
            1,
            1,
            1,
        )
        with credential(crm.api_key), engine_worker(db_url):  # no crash hook: it walks
            final = wait_finished(db_url, run_id, timeout=60)
        truth = crm.truth()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("organizations",))
    assert [j["status"] for j in task_jobs(db_url)] == ["discarded", "succeeded"]


@pytest.mark.slow
def test_a_task_whose_worker_keeps_dying_fails_its_run_once_the_queue_gives_up(
    db_url: str,
) -> None:
    with DemoCRM.start(seed=32, organizations=10, **SMALL) as crm:
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"], stripes=1))
        _queue_gives_up_on_the_task_job(db_url, run_id, crm.api_key)
        sweeps = _sweep(db_url)
        assert (sweeps.failed_tasks, sweeps.failed_runs, sweeps.released) == (1, 1, 0)
        assert sweeps.queued == 0 and len(task_jobs(db_url)) == 1  # no new job, no new loop
    final = state(db_url, run_id)
    assert final["state"] == "failed" and "ProcessDied" in final["error"]
    assert _task_rows(db_url)[0]["status"] == "failed"


@pytest.mark.slow
def test_a_hung_worker_loses_its_tasks_once_stale_and_is_fenced_out_when_it_wakes(
    db_url: str,
) -> None:
    with DemoCRM.start(seed=33, organizations=1200, latency_ms=200, **SMALL) as crm:
        run_id = start_run(
            db_url, request(crm.url, kinds=["organizations"], stripes=2, page_size=100)
        )
        hung = crashing_worker(db_url, crm.api_key, "")  # no crash point: it just runs
        try:
            wait_for(lambda: state(db_url, run_id)["tasks_running"] == 2, 30, "two claims")
            hung.proc.send_signal(signal.SIGSTOP)  # alive, holding its locks, doing nothing
            time.sleep(1.5)  # the claims age: the stall itself, not a wait for an event
            sweeps = _sweep(db_url, stale_after=1.0)
            assert (sweeps.released, sweeps.refilled_runs, sweeps.queued) == (2, 1, 2)
            with credential(crm.api_key), engine_worker(db_url):
                final = wait_finished(db_url, run_id, timeout=120)
            hung.proc.send_signal(signal.SIGCONT)  # it finds its tasks gone at its next window
            wait_for(lambda: ready_task_jobs(db_url) == 0, 30, "the woken worker to let go")
            truth = crm.truth()
        finally:
            hung.proc.send_signal(signal.SIGCONT)
            hung.stop()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("organizations",))


@pytest.mark.slow
def test_a_barrier_winner_killed_in_its_last_transaction_leaves_no_phase_closed(
    db_url: str,
) -> None:
    with DemoCRM.start(seed=34, organizations=30, people=20, deals=0, malformed_rate=0) as crm:
        run_id = start_run(db_url, request(crm.url, kinds=["organizations", "people"], stripes=1))
        _died(crashing_worker(db_url, crm.api_key, "barrier"))
        (task,) = _task_rows(db_url)
        assert (task["phase"], task["status"]) == (0, "running")  # its finish rolled back
        assert state(db_url, run_id)["phase"] == 0
        sweeps = _sweep(db_url)
        assert (sweeps.advanced, sweeps.released, sweeps.queued) == (0, 0, 0)  # nothing to do
        with credential(crm.api_key), engine_worker(db_url):  # the same job takes it back
            final = wait_finished(db_url, run_id, timeout=60)
        truth = crm.truth()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("organizations", "people"))
    barrier_held(db_url, run_id)
    assert [(t["phase"], t["attempts"]) for t in _task_rows(db_url)] == [(0, 2), (1, 1)]


@pytest.mark.slow
def test_a_run_whose_workers_all_died_resumes_on_its_own_jobs(db_url: str) -> None:
    with DemoCRM.start(seed=35, organizations=2000, latency_ms=100, **SMALL) as crm:
        # both workers are ready before the run starts: started after it, the first one walked
        # the whole run while the second was still starting on a busy machine
        workers = [crashing_worker(db_url, crm.api_key, "") for _ in range(2)]
        run_id = start_run(
            db_url,
            request(  # six stripes on four threads: two tasks wait queued
                crm.url, kinds=["organizations"], page_size=100, stripes=6, max_in_flight=6
            ),
        )
        wait_for(lambda: state(db_url, run_id)["rows_written"] >= 200, 60, "progress")
        for proc in workers:
            proc.kill()
        assert state(db_url, run_id)["state"] == "running", "the run ended before the kill"
        # a statement a worker sent just before its kill may still begin (and renew the run's
        # heartbeat) on a busy machine: wait until its backends are gone
        wait_for(lambda: _other_backends(db_url) == 0, 60, "the workers' backends to end")
        waiting = task_jobs(db_url)
        time.sleep(1.5)  # the heartbeat ages: the stall itself, not a wait for an event
        sweeps = _sweep(db_url, stale_after=1.0)
        assert (sweeps.stalled_runs, sweeps.requeued, sweeps.released, sweeps.queued) == (
            1,
            0,
            0,
            0,
        )
        assert task_jobs(db_url) == waiting  # no job added, none touched
        with credential(crm.api_key), engine_worker(db_url):
            final = wait_finished(db_url, run_id, timeout=120)
        truth = crm.truth()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("organizations",))
    tasks = _task_rows(db_url)
    assert len(task_jobs(db_url)) == len(tasks)  # one job per task: none enqueued twice


def test_one_task_handed_to_two_jobs_runs_once(db_url: str) -> None:
    with DemoCRM.start(seed=36, organizations=120, latency_ms=50, **SMALL) as crm:
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"], page_size=50))
        queued = [t["id"] for t in _task_rows(db_url)]
        with connect.connect(db_url) as conn, conn.transaction():  # the planner's race
            enqueue_tasks(conn, runs.lock(conn, run_id), queued)
        with credential(crm.api_key), engine_worker(db_url, lanes="migrations:8"):
            final = wait_finished(db_url, run_id, timeout=60)
        truth = crm.truth()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("organizations",))
    jobs = task_jobs(db_url)
    for task in _task_rows(db_url):
        mine = [j for j in jobs if j["args"][0] == task["id"]]
        assert task["attempts"] == 1 and task["job_id"] in {j["id"] for j in mine}
        assert len(mine) == (2 if task["id"] in queued else 1)
        assert {j["status"] for j in mine} == {"succeeded"}  # the other one exited


# -- a known trap: a retry that strands work behind the barrier -----------------------------------


@pytest.mark.slow
def test_a_phase_0_task_that_fails_for_good_holds_the_barrier_and_its_retry_finishes_the_run(
    db_url: str,
) -> None:
    with DemoCRM.start(seed=37, organizations=800, people=60, deals=0, malformed_rate=0) as crm:
        run_id = start_run(
            db_url,
            request(crm.url, kinds=["organizations", "people"], stripes=2, page_size=100),
        )
        with connect.connect(db_url) as conn:  # the queue's patience, 25 claims, down to 2
            conn.execute("UPDATE ferryman_jobs SET max_attempts = 2")
        for _ in range(2):  # stripe organizations:0 (the first job) kills its worker
            _died(crashing_worker(db_url, crm.api_key, "walk:organizations:0", "migrations:1"))
        with credential(crm.api_key), engine_worker(db_url):
            wait_for(lambda: _stripe_done(db_url), 60, "stripe organizations:100 to end")
            wait_for(lambda: task_jobs(db_url)[0]["status"] == "failed", 30, "ProcessDied")
            sweeps = _sweep(db_url)  # the task whose job died twice fails, and its run
            assert (sweeps.failed_tasks, sweeps.failed_runs) == (1, 1)
            failed = state(db_url, run_id)
            assert failed["state"] == "failed" and failed["phase"] == 0  # the barrier held
            with connect.connect(db_url) as conn:
                assert runs.retry(conn, run_id) == 1
            final = wait_finished(db_url, run_id, timeout=60)
        truth = crm.truth()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth, kinds=("organizations", "people"))
    barrier_held(db_url, run_id)


def _stripe_done(db_url: str) -> bool:
    """Every task of stripe organizations:100 (100, 300, 500, 700 and the empty 900) ended."""
    rows = _task_rows(db_url)
    stripe = [t for t in rows if t["cursor_key"] != "organizations:0" and t["phase"] == 0]
    return len(stripe) == 5 and all(t["status"] == "done" for t in stripe)


def test_a_retried_run_reopens_the_phase_of_its_earliest_unfinished_task(
    conn: connect.Connection,
) -> None:
    run = _started(conn)
    # Forged: a failed phase-0 task in a run whose barrier moved on. A task fails together with
    # its run (one transaction) and the barrier moves only a running run, so no real event makes
    # this; it is how a naive retry strands work, and retry must not depend on its absence.
    conn.execute(
        "UPDATE ferryman_tasks SET status = CASE WHEN cursor_key = 'organizations:0'"
        " THEN 'failed' ELSE 'done' END"
    )
    conn.execute("UPDATE ferryman_runs SET phase = 1, state = 'failed', error = 'x'")
    assert runs.retry(conn, run["id"]) == 1
    assert runs.lock(conn, run["id"])["phase"] == 0
    queued = [t for t in _tasks(conn) if t["status"] == "queued"]
    assert [t["phase"] for t in queued] == [0] and _jobs(conn) == 5  # 4 from the start
