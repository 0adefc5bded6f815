"""Batches: members live while their job is ready, one finisher, callbacks, the
stalled sweep, and the lane thread that checks a batch once after a run of its members."""

from __future__ import annotations

import ferryman_testjobs as tj
import pytest
from net import wait_for
from workers import Subprocess, in_process, scalar, subprocesses

from ferryman_worker.db import connect
from ferryman_worker.queue import admin, batch, enqueue, enqueue_many
from ferryman_worker.queue.worker import Worker


def _setup(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        tj.create_tables(conn)


def _callbacks(db_url: str) -> list[dict[str, object]]:
    with connect.connect(db_url) as conn:
        return conn.execute("SELECT kind, batch, tag FROM test_callbacks ORDER BY at").fetchall()


def _callbacks_for(tag: str) -> dict[str, object]:
    return {
        "on_finish": tj.callback.call(kind="finish", tag=tag),
        "on_success": tj.callback.call(kind="success", tag=tag),
        "on_failure": tj.callback.call(kind="failure", tag=tag),
    }


@pytest.mark.slow
def test_a_batch_of_1000_across_two_processes_finishes_exactly_once(db_url: str) -> None:
    _setup(db_url)
    with connect.connect(db_url) as conn:
        with batch(conn=conn, purpose="load", **_callbacks_for("big")) as b:  # type: ignore[arg-type]
            enqueue_many([tj.record.call(n=i) for i in range(1000)], conn=conn)
        with subprocesses(db_url, 2, lanes="default:4"):
            wait_for(lambda: len(_callbacks(db_url)) >= 2, 120, "the callbacks")
            wait_for(
                lambda: (
                    scalar(db_url, "SELECT count(*) FROM ferryman_jobs WHERE status = 'ready'") == 0
                ),
                10,
                "the callbacks to end",
            )
        calls = _callbacks(db_url)
        row = conn.execute("SELECT * FROM ferryman_batches WHERE id = %s", (b.id,)).fetchone()
    assert sorted(c["kind"] for c in calls) == ["finish", "success"]
    info = calls[0]["batch"]
    assert info == {
        "id": b.id,
        "metadata": {"purpose": "load"},
        "total": 1000,
        "completed": 1000,
        "failed": 0,
    }
    assert row is not None and row["finished_at"] is not None
    assert (row["total_jobs"], row["completed_jobs"], row["failed_jobs"]) == (1000, 1000, 0)
    assert scalar(db_url, "SELECT ferryman_batch_live(%s)", (b.id,)) is False
    assert scalar(db_url, "SELECT count(*) FROM test_runs") == 1000


def test_a_member_that_fails_for_good_fires_on_failure(db_url: str) -> None:
    _setup(db_url)
    with in_process(db_url, backoff_base=0.02) as _, connect.connect(db_url) as conn:
        with batch(conn=conn, **_callbacks_for("mixed")):  # type: ignore[arg-type]
            enqueue_many([tj.record.call(n=i) for i in range(20)], conn=conn)
            enqueue(tj.flaky, fail_times=9, conn=conn)
        wait_for(lambda: len(_callbacks(db_url)) >= 2, 30, "the callbacks")
    calls = _callbacks(db_url)
    assert sorted(c["kind"] for c in calls) == ["failure", "finish"]
    assert calls[0]["batch"]["total"] == 21  # type: ignore[index]
    assert calls[0]["batch"]["failed"] == 1  # type: ignore[index]
    assert calls[0]["batch"]["completed"] == 20  # type: ignore[index]


def test_jobs_enqueued_by_a_member_join_its_batch(db_url: str) -> None:
    _setup(db_url)
    with in_process(db_url) as _, connect.connect(db_url) as conn:
        with batch(conn=conn, **_callbacks_for("tree")) as b:  # type: ignore[arg-type]
            enqueue_many([tj.spawn.call(children=5) for _ in range(3)], conn=conn)
        wait_for(lambda: len(_callbacks(db_url)) >= 2, 30, "the callbacks")
        assert (
            scalar(db_url, "SELECT count(*) FROM ferryman_jobs WHERE batch_id = %s", (b.id,)) == 18
        )
        # the callback ran after the children: all 15 records exist
        first_callback = scalar(db_url, "SELECT min(at) FROM test_callbacks")
        last_child = scalar(db_url, "SELECT max(finished_at) FROM test_runs")
    assert last_child <= first_callback
    assert [c["batch"]["total"] for c in _callbacks(db_url)] == [18, 18]  # type: ignore[index]


def test_an_empty_batch_finishes_when_sealed(db_url: str) -> None:
    _setup(db_url)
    with in_process(db_url) as _, connect.connect(db_url) as conn:
        with batch(conn=conn, on_finish=tj.callback.call(kind="finish", tag="empty")):
            pass
        wait_for(lambda: len(_callbacks(db_url)) == 1, 10, "the callback")
    assert _callbacks(db_url)[0]["batch"]["total"] == 0  # type: ignore[index]


def test_a_batch_in_a_rolled_back_transaction_leaves_nothing(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        with pytest.raises(RuntimeError), conn.transaction(), batch(conn=conn):
            enqueue_many([tj.record.call(n=i) for i in range(5)], conn=conn)
            raise RuntimeError("abandon")
        assert scalar(db_url, "SELECT count(*) FROM ferryman_batches") == 0
        assert scalar(db_url, "SELECT count(*) FROM ferryman_jobs") == 0


def test_members_do_not_finish_a_batch_before_it_is_sealed(db_url: str) -> None:
    _setup(db_url)
    with in_process(db_url) as _, connect.connect(db_url) as conn:
        with batch(on_finish=tj.callback.call(kind="finish", tag="slow-fill")) as b:
            enqueue(tj.record, n=1, conn=conn)  # autocommit: runs while the block goes on
            wait_for(lambda: scalar(db_url, "SELECT count(*) FROM test_runs") == 1, 10, "member")
            assert _callbacks(db_url) == []
            enqueue(tj.record, n=2, conn=conn)
        wait_for(lambda: len(_callbacks(db_url)) == 1, 10, "the callback")
    assert _callbacks(db_url)[0]["batch"]["id"] == b.id  # type: ignore[index]
    assert _callbacks(db_url)[0]["batch"]["total"] == 2  # type: ignore[index]


def test_the_stalled_sweep_finishes_a_batch_whose_callback_enqueue_was_lost(db_url: str) -> None:
    _setup(db_url)
    with connect.connect(db_url) as conn:
        with batch(conn=conn, on_finish=tj.callback.call(kind="finish", tag="lost")) as b:
            ids = enqueue_many([tj.record.call(n=i) for i in range(3)], conn=conn)
        # the members finished, but the finisher died before its after-commit check
        conn.execute(
            "UPDATE ferryman_jobs SET status = 'succeeded', finished_at = now() WHERE id = ANY(%s)",
            (ids,),
        )
        # and a second batch whose enqueuing process died before sealing it
        conn.execute("INSERT INTO ferryman_batches (created_at) VALUES (now() - interval '1 hour')")
        report = admin.sweep_stalled_batches(conn, stalled_for=300)
        again = admin.sweep_stalled_batches(conn, stalled_for=300)
        finished = conn.execute(
            "SELECT count(*) AS n FROM ferryman_batches WHERE finished_at IS NOT NULL"
        ).fetchone()
        callback_jobs = conn.execute(
            "SELECT kwargs FROM ferryman_jobs WHERE name = 'test.callback'"
        ).fetchall()
    assert (report.sealed, report.finished) == (1, 2)
    assert (again.sealed, again.finished) == (0, 0)
    assert finished is not None and finished["n"] == 2
    assert len(callback_jobs) == 1
    assert callback_jobs[0]["kwargs"]["batch"]["id"] == b.id  # type: ignore[index]


def test_the_stalled_sweep_finishes_a_batch_whose_members_were_discarded_or_deleted(
    db_url: str,
) -> None:
    """Members ended by hand (discarded, deleted) are no longer live: no member's end will check
    the batch, so the sweep finishes it, once; the discarded member counts as failed."""
    with connect.connect(db_url) as conn:
        with batch(conn=conn, on_finish=tj.callback.call(kind="finish", tag="gone")) as b:
            ids = enqueue_many([tj.record.call(n=i) for i in range(3)], conn=conn)
        conn.execute("UPDATE ferryman_jobs SET status = 'discarded' WHERE id = %s", (ids[0],))
        conn.execute("DELETE FROM ferryman_jobs WHERE id = %s", (ids[1],))
        early = admin.sweep_stalled_batches(conn, stalled_for=300)  # ids[2] is still live
        conn.execute("UPDATE ferryman_jobs SET status = 'succeeded' WHERE id = %s", (ids[2],))
        report = admin.sweep_stalled_batches(conn, stalled_for=300)
        again = admin.sweep_stalled_batches(conn, stalled_for=300)
    assert (early.finished, report.finished, again.finished) == (0, 1, 0)
    row = _batch(db_url, b.id)
    assert (row["total_jobs"], row["completed_jobs"], row["failed_jobs"]) == (3, 2, 1)


def test_concurrent_finishers_have_one_winner(db_url: str) -> None:
    import threading

    with connect.connect(db_url) as conn:
        with batch(conn=conn, on_finish=tj.callback.call(kind="finish", tag="race")) as b:
            ids = enqueue_many([tj.record.call(n=1)], conn=conn)
        conn.execute("UPDATE ferryman_jobs SET status = 'succeeded' WHERE id = %s", (ids[0],))
    wins: list[bool] = []
    barrier = threading.Barrier(8)

    def finish() -> None:
        with connect.connect(db_url) as c:
            barrier.wait()
            wins.append(
                bool(c.execute("SELECT ferryman_finish_batch(%s) AS f", (b.id,)).fetchone()["f"])
            )  # type: ignore[index]

    threads = [threading.Thread(target=finish) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 7 + [True]
    assert scalar(db_url, "SELECT count(*) FROM ferryman_jobs WHERE name = 'test.callback'") == 1


def _batch(db_url: str, batch_id: int) -> dict[str, object]:
    with connect.connect(db_url) as conn:
        row = conn.execute("SELECT * FROM ferryman_batches WHERE id = %s", (batch_id,)).fetchone()
    assert row is not None
    return row


def test_a_failed_member_retried_rejoins_its_batch_which_finishes_once(db_url: str) -> None:
    """Member F fails for good while member H runs; F is retried (ferryman jobs retry) and runs
    again. H ends first: the batch must wait for F, now a member again, then finish once, as a
    success (F succeeded in the end)."""
    _setup(db_url)
    with in_process(db_url, lanes="default:2") as worker, connect.connect(db_url) as conn:
        with batch(conn=conn, **_callbacks_for("retried")) as b:  # type: ignore[arg-type]
            fixable = enqueue(tj.fixable, conn=conn)
            enqueue(tj.hold, conn=conn)
        wait_for(
            lambda: (
                scalar(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", (fixable,))
                == "failed"
            ),
            10,
            "F to fail for good",
        )
        conn.execute("INSERT INTO test_fixed VALUES (false)")
        assert admin.retry_failed(conn, [fixable]) == 1
        wait_for(
            lambda: (
                scalar(db_url, "SELECT count(*) FROM test_started WHERE job_id = %s", (fixable,))
                == 2
            ),
            10,
            "F to run again",
        )
        conn.execute("INSERT INTO test_release VALUES (true)")  # H ends, F still runs
        lane = worker.lanes["default"]
        wait_for(lambda: lane.waiting == 1, 10, "H's thread to finish H and go idle")
        assert _batch(db_url, b.id)["finished_at"] is None
        conn.execute("UPDATE test_fixed SET go = true")  # F ends
        wait_for(lambda: len(_callbacks(db_url)) == 2, 10, "the callbacks")
        wait_for(lambda: lane.waiting == 2, 10, "the lane to go idle")
    calls = _callbacks(db_url)  # the worker has stopped: nothing can land after this
    assert sorted(c["kind"] for c in calls) == ["finish", "success"]
    row = _batch(db_url, b.id)
    assert (row["total_jobs"], row["completed_jobs"], row["failed_jobs"]) == (2, 2, 0)


def test_pruning_removes_finished_batches_and_their_members_never_a_live_one(
    db_url: str,
) -> None:
    """A member that succeeded long before its batch ends stays while the batch is live (its
    snapshot counts it); once the batch finished and the retention passed, the batch and its
    finished members go. A failed member stays for inspection."""
    _setup(db_url)
    with in_process(db_url, lanes="default:3") as worker, connect.connect(db_url) as conn:
        with batch(conn=conn, **_callbacks_for("pruned")) as b:  # type: ignore[arg-type]
            done = enqueue(tj.record, n=1, conn=conn)
            failed = enqueue(tj.fixable, conn=conn)
            enqueue(tj.hold, conn=conn)
        wait_for(lambda: _runs(db_url, done) == 1, 10, "the first member")
        wait_for(
            lambda: (
                scalar(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", (failed,))
                == "failed"
            ),
            10,
            "the failing member",
        )
        pruned = admin.prune(conn, older_than=0.0)  # everything finished is past retention
        assert (
            scalar(db_url, "SELECT count(*) FROM ferryman_jobs WHERE batch_id = %s", (b.id,)) == 3
        )
        assert pruned["batches"] == 0
        conn.execute("INSERT INTO test_release VALUES (true)")
        try:
            wait_for(lambda: len(_callbacks(db_url)) == 2, 10, "the batch to finish")
        except AssertionError as exc:  # seen once in CI, 1 in 60 runs under load
            raise AssertionError(f"{exc}; {_state(conn, b.id, worker)}") from None
        wait_for(
            lambda: (
                scalar(db_url, "SELECT count(*) FROM ferryman_jobs WHERE status = 'ready'") == 0
            ),
            10,
            "the callbacks to run",
        )
        assert admin.prune(conn, older_than=3600.0)["batches"] == 0  # within retention
        assert _batch(db_url, b.id)["failed_jobs"] == 1
        pruned = admin.prune(conn, older_than=0.0)
    assert pruned["batches"] == 1
    assert scalar(db_url, "SELECT count(*) FROM ferryman_batches") == 0
    assert scalar(db_url, "SELECT count(*) FROM ferryman_batch_enqueues") == 0
    left = scalar(db_url, "SELECT array_agg(id) FROM ferryman_jobs")
    assert left == [failed]


def _state(conn: connect.Connection, batch_id: int, worker: Worker) -> str:
    """What a batch that did not finish looks like: its row, its jobs, the callbacks run, the
    advisory locks held and the backends the claims name, and the worker's lanes and threads."""
    batch_row = conn.execute("SELECT * FROM ferryman_batches WHERE id = %s", (batch_id,)).fetchall()
    jobs = conn.execute(
        "SELECT id, name, status, claimed_by, claims, attempts, batch_id, last_error"
        " FROM ferryman_jobs ORDER BY id"
    ).fetchall()
    callbacks = conn.execute("SELECT kind, tag FROM test_callbacks").fetchall()
    locks = conn.execute(
        "SELECT pid, classid, objid, granted FROM pg_locks WHERE locktype = 'advisory'"
    ).fetchall()
    backends = conn.execute(
        "SELECT a.pid, a.state, a.wait_event, left(a.query, 80) AS query FROM pg_stat_activity a"
        " WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()"
    ).fetchall()
    lanes = {
        name: (lane.waiting, lane._credits, lane._draining) for name, lane in worker.lanes.items()
    }
    threads = [(t.name, t.is_alive()) for t in worker._lane_threads]
    return (
        f"batch {batch_row}; jobs {jobs}; callbacks {callbacks}; advisory locks {locks};"
        f" backends {backends}; lanes (waiting, credits, draining) {lanes}; threads {threads}"
    )


def _runs(db_url: str, job_id: int) -> int:
    return int(scalar(db_url, "SELECT count(*) FROM test_runs WHERE job_id = %s", (job_id,)))


def test_a_batch_whose_last_member_is_followed_by_another_job_finishes(db_url: str) -> None:
    """A lane thread checks a batch once after a run of its members: the statement that writes
    the last member's success also claims the next job, here not a member, and the batch is
    checked by the statement after it (the one that ends that job)."""
    _setup(db_url)
    with connect.connect(db_url) as conn, conn.transaction():
        with batch(conn=conn, **_callbacks_for("followed")) as b:  # type: ignore[arg-type]
            enqueue_many([tj.noop.call() for _ in range(3)], conn=conn)
        after = enqueue(tj.wait, conn=conn)  # not a member: holds its thread until released
    with in_process(db_url, lanes="default:1"):
        wait_for(
            lambda: scalar(db_url, "SELECT count(*) FROM test_started WHERE job_id = %s", (after,)),
            10,
            "the job after the batch to start",
        )
        conn_release(db_url)
        wait_for(lambda: len(_callbacks(db_url)) == 2, 10, "the batch's callbacks")
    assert sorted(c["kind"] for c in _callbacks(db_url)) == ["finish", "success"]
    row = _batch(db_url, b.id)
    assert (row["total_jobs"], row["completed_jobs"], row["failed_jobs"]) == (3, 3, 0)


def test_a_worker_killed_after_ending_a_member_and_claiming_the_next_loses_no_completion(
    db_url: str,
) -> None:
    """The statement that ends member A claims member B of the same batch, so A's end is not
    checked: B's will be. SIGKILL the worker while B runs: B runs again elsewhere, and its end
    finishes the batch, once."""
    _setup(db_url)
    with (
        connect.connect(db_url) as conn,
        batch(conn=conn, **_callbacks_for("killed")) as b,  # type: ignore[arg-type]
    ):
        first = enqueue(tj.noop, conn=conn)
        second = enqueue(tj.wait, conn=conn)
    proc = Subprocess(db_url, "default:1")
    try:
        proc.wait_ready()
        wait_for(
            lambda: scalar(
                db_url, "SELECT count(*) FROM test_started WHERE job_id = %s", (second,)
            ),
            30,
            "B to start",
        )
        assert scalar(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", (first,)) == (
            "succeeded"
        )
        proc.kill()
    finally:
        proc.stop()
    assert _batch(db_url, b.id)["finished_at"] is None
    conn_release(db_url)
    with in_process(db_url, lanes="default:1"):
        wait_for(lambda: len(_callbacks(db_url)) == 2, 20, "the batch's callbacks")
        wait_for(
            lambda: (
                scalar(db_url, "SELECT count(*) FROM ferryman_jobs WHERE status = 'ready'") == 0
            ),
            10,
            "the callbacks to end",
        )
    assert sorted(c["kind"] for c in _callbacks(db_url)) == ["finish", "success"]
    assert scalar(db_url, "SELECT count(*) FROM test_started WHERE job_id = %s", (second,)) == 2
    row = _batch(db_url, b.id)
    assert (row["total_jobs"], row["completed_jobs"], row["failed_jobs"]) == (2, 2, 0)


def conn_release(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        conn.execute("INSERT INTO test_release VALUES (true)")
