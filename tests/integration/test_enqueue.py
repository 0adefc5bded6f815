"""Enqueueing: transactional, notifying at commit, bulk in one statement."""

from __future__ import annotations

import datetime

import ferryman_testjobs as tj
import pytest

from ferryman_worker.db import connect
from ferryman_worker.errors import QueueError
from ferryman_worker.queue import configure, enqueue, enqueue_many


def _jobs(conn: connect.Connection) -> list[dict[str, object]]:
    return conn.execute(
        "SELECT id, queue, name, args, kwargs, priority FROM ferryman_jobs ORDER BY id"
    ).fetchall()


def test_a_rolled_back_transaction_enqueues_nothing(conn: connect.Connection) -> None:
    with pytest.raises(ZeroDivisionError), conn.transaction():
        enqueue(tj.record, n=1, conn=conn)
        enqueue_many([tj.record.call(n=i) for i in range(10)], conn=conn)
        raise ZeroDivisionError
    assert _jobs(conn) == []


def test_enqueue_in_a_transaction_notifies_only_when_it_commits(db_url: str) -> None:
    with connect.connect(db_url) as listener, connect.connect(db_url) as conn:
        listener.execute("LISTEN ferryman_jobs")
        with conn.transaction():
            enqueue(tj.record, n=1, conn=conn)
            assert list(listener.notifies(timeout=0.3)) == []
        payloads = [n.payload for n in listener.notifies(timeout=2.0, stop_after=1)]
    assert [p.rsplit(":", 1)[0] for p in payloads] == ["default:1"]


def test_a_bulk_enqueue_notifies_each_queue_once_with_its_number_of_due_jobs(db_url: str) -> None:
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30)
    calls = [tj.record.call(n=i).with_options(queue=f"q{i % 2}") for i in range(5)]
    calls.append(tj.record.call(n=9).with_options(queue="q0", run_at=later))
    with connect.connect(db_url) as listener, connect.connect(db_url) as conn:
        listener.execute("LISTEN ferryman_jobs")
        enqueue_many(calls, conn=conn)
        payloads = {n.payload for n in listener.notifies(timeout=2.0, stop_after=3)}
    due = {p for p in payloads if "|" in p}
    assert {p.rsplit(":", 1)[0] for p in payloads - due} == {"q0:3", "q1:2"}
    assert [p.partition("|")[0] for p in due] == ["q0"]
    assert abs(float(due.pop().partition("|")[2]) - later.timestamp()) < 0.01


def test_two_statements_of_one_transaction_wake_for_all_their_jobs(db_url: str) -> None:
    """PostgreSQL delivers identical payloads of one transaction once: two enqueues of one job
    each must still announce two jobs."""
    with connect.connect(db_url) as listener, connect.connect(db_url) as conn:
        listener.execute("LISTEN ferryman_jobs")
        with conn.transaction():
            enqueue(tj.record, n=1, conn=conn)
            enqueue(tj.record, n=2, conn=conn)
        payloads = [n.payload for n in listener.notifies(timeout=2.0, stop_after=2)]
    assert sum(int(p.split(":")[1]) for p in payloads) == 2


def test_a_job_not_yet_due_notifies_its_due_time(db_url: str) -> None:
    due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30)
    with connect.connect(db_url) as listener, connect.connect(db_url) as conn:
        listener.execute("LISTEN ferryman_jobs")
        enqueue(tj.record.call(n=1).with_options(run_at=due), conn=conn)
        payload = next(iter(listener.notifies(timeout=2.0, stop_after=1))).payload
    queue, _, epoch = payload.partition("|")
    assert queue == "default"
    assert abs(float(epoch) - due.timestamp()) < 0.01


def test_bulk_enqueue_returns_ids_in_order_with_arguments_and_options(
    conn: connect.Connection,
) -> None:
    calls = [
        tj.record.call(n=i).with_options(priority=i % 3, queue=f"q{i % 2}") for i in range(500)
    ]
    ids = enqueue_many(calls, conn=conn)
    rows = _jobs(conn)
    assert ids == [row["id"] for row in rows] and len(ids) == 500
    assert [row["kwargs"] for row in rows] == [{"n": i} for i in range(500)]
    assert [row["queue"] for row in rows[:2]] == ["q0", "q1"]
    assert [row["priority"] for row in rows[:3]] == [0, 1, 2]
    assert enqueue_many([], conn=conn) == []


def test_positional_arguments_round_trip(conn: connect.Connection) -> None:
    enqueue(tj.sleep, 0.5, 7, conn=conn)
    assert _jobs(conn)[0]["args"] == [0.5, 7]


def test_enqueue_without_a_connection_needs_a_configured_database() -> None:
    configure(None)
    with pytest.raises(QueueError, match="pass conn="):
        enqueue(tj.noop)


def test_enqueue_of_a_call_takes_no_more_arguments(conn: connect.Connection) -> None:
    with pytest.raises(QueueError, match="no further arguments"):
        enqueue(tj.record.call(n=1), 5, conn=conn)
