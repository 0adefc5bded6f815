"""Faults at the capsule's weak moments, for real: a statement cancelled (``pg_cancel_backend``)
or a connection terminated (``pg_terminate_backend``) between a job's end and its batch's finish
check or its claim's release, and a job that raises what no ``except Exception`` catches. Nothing
is lost: the finish is checked again, the claim freed, the lane thread goes on."""

from __future__ import annotations

from collections.abc import Iterator

import ferryman_testjobs as tj
import pytest
from net import wait_for
from psycopg import sql
from workers import in_process, scalar

from ferryman_worker.db import connect
from ferryman_worker.queue import batch, enqueue
from ferryman_worker.queue.worker import Worker

QUIET = 3600.0  # the poll never rescues a lost finish or claim within a test


def _setup(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        tj.create_tables(conn)


def _started(db_url: str, job_id: int) -> int:
    return int(scalar(db_url, "SELECT count(*) FROM test_started WHERE job_id = %s", (job_id,)))


def _blocked_backend(db_url: str, text: str, what: str) -> int:
    """Wait for the backend that waits on a lock in a statement containing ``text``: its pid."""
    found: list[int] = []

    def blocked() -> bool:
        with connect.connect(db_url) as conn:
            found[:] = [
                int(row["pid"])
                for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND position(%s in query) > 0",
                    (text,),
                )
            ]
        return bool(found)

    wait_for(blocked, 10, what)
    return found[0]


def _idle(worker: Worker) -> None:
    lane = worker.lanes["default"]
    wait_for(lambda: lane.waiting == lane.spec.width, 10, "the lane to go idle")


@pytest.fixture
def quiet_worker(db_url: str) -> Iterator[Worker]:
    _setup(db_url)
    with in_process(db_url, lanes="default:1", poll_interval=QUIET) as worker:
        _idle(worker)
        yield worker


@pytest.mark.parametrize("fault", ["pg_cancel_backend", "pg_terminate_backend"])
def test_a_failed_finish_check_is_checked_again(
    db_url: str, quiet_worker: Worker, fault: str
) -> None:
    """The statement that finishes the batch after its last member's success fails: the batch
    still finishes, its callbacks run, once."""
    with connect.connect(db_url) as conn:
        with batch(conn=conn, on_finish=tj.callback.call(kind="finish", tag="checked")) as b:
            member = enqueue(tj.wait, conn=conn)
        wait_for(lambda: _started(db_url, member) == 1, 10, "the member to start")
        with connect.connect(db_url, autocommit=False) as blocker:
            blocker.execute("SELECT 1 FROM ferryman_batches WHERE id = %s FOR UPDATE", (b.id,))
            conn.execute("INSERT INTO test_release VALUES (true)")
            pid = _blocked_backend(
                db_url, "ferryman_finish_batch", "the finish check to wait for the batch's row"
            )
            conn.execute(sql.SQL("SELECT {}(%s)").format(sql.Identifier(fault)), (pid,))
            blocker.rollback()
        wait_for(
            lambda: scalar(db_url, "SELECT count(*) FROM test_callbacks") == 1,
            10,
            "the batch's callback",
        )
        row = conn.execute("SELECT * FROM ferryman_batches WHERE id = %s", (b.id,)).fetchone()
    assert row is not None and (row["total_jobs"], row["completed_jobs"]) == (1, 1)
    assert scalar(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", (member,)) == (
        "succeeded"
    )


def test_a_claim_whose_release_failed_on_a_live_connection_is_freed(
    db_url: str, quiet_worker: Worker
) -> None:
    """The statement that writes a job's success and releases its claim is cancelled: the
    connection lives on in the pool, which dropped the claim's lock, but the job's row still
    names that backend. The job is freed and runs again (at least once), and succeeds."""
    with connect.connect(db_url) as conn:
        job_id = enqueue(tj.wait, conn=conn)
        wait_for(lambda: _started(db_url, job_id) == 1, 10, "the job to start")
        with connect.connect(db_url, autocommit=False) as blocker:
            blocker.execute("SELECT 1 FROM ferryman_jobs WHERE id = %s FOR UPDATE", (job_id,))
            conn.execute("INSERT INTO test_release VALUES (true)")
            pid = _blocked_backend(db_url, "'succeeded'", "the job's success to wait for its row")
            conn.execute("SELECT pg_cancel_backend(%s)", (pid,))
            blocker.rollback()
        wait_for(
            lambda: (
                scalar(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", (job_id,))
                == "succeeded"
            ),
            10,
            "the job to be freed, run again and succeed",
        )
    assert _started(db_url, job_id) == 2


def test_a_lane_thread_survives_a_job_that_raises_system_exit(
    db_url: str, quiet_worker: Worker
) -> None:
    """SystemExit is no Exception: it used to end the lane thread, silently. The thread goes on,
    the job fails for good after its attempts, and the next job runs."""
    with connect.connect(db_url) as conn:
        exiting = enqueue(tj.exits, conn=conn)
        after = enqueue(tj.record, n=1, conn=conn)
    wait_for(
        lambda: scalar(db_url, "SELECT count(*) FROM test_runs WHERE job_id = %s", (after,)),
        20,
        "the job after the exiting one",
    )
    status = scalar(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", (exiting,))
    assert status == "failed"
    assert _started(db_url, exiting) == 3  # its fourth claim fails it unrun (3 attempts died)
    assert all(thread.is_alive() for thread in quiet_worker._lane_threads)
