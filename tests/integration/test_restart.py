"""A PostgreSQL outage: the capsule is back within a second of the server's return, and a worker
that was only disconnected is neither reaped nor logged as gone; a worker that is only paused
keeps its claims.

The test runs its own embedded server, whatever server the session uses: it stops it.
"""

from __future__ import annotations

import logging
import pathlib
import shlex
import signal
import tempfile
import time
from collections.abc import Iterator

import ferryman_testjobs as tj
import pytest
from net import wait_for
from workers import in_process, scalar, subprocesses

from ferryman_worker.db import connect, databases, embedded, migrate, queries
from ferryman_worker.queue import enqueue

OUTAGE = 10.0
"""Seconds the server is down: psycopg_pool's own backoff (1 s, doubling) would retry only
about 5 s after the server is back; ours retries every 0.5 s at most."""


class Server:
    """A private embedded server that the test can stop and start again."""

    def __init__(self) -> None:
        self.embedded = embedded.start(
            tempfile.mkdtemp(prefix="ferryman-restart-pg-"), cleanup="delete"
        )
        opts = shlex.split((self.embedded.data_dir / "postmaster.opts").read_text())[1:]
        at = opts.index("-D")
        self._options = shlex.join(opts[:at] + opts[at + 2 :])  # pg_ctl start gives -D itself

    def _pg_ctl(self, *args: str) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(
            ["-w", *args],
            pgdata=pathlib.Path(self.embedded.data_dir),
            user=self.embedded.handle.system_user,
            timeout=60,
        )

    def stop(self) -> None:
        self._pg_ctl("stop", "-m", "fast")

    def start(self) -> None:
        self._pg_ctl("start", "-o", self._options)


@pytest.fixture
def server() -> Iterator[Server]:
    own = Server()
    try:
        yield own
    finally:
        own.embedded.stop()


def test_after_an_outage_jobs_wake_at_normal_speed_within_two_seconds(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """The outage is real (the server stopped for 10 s). A second worker process is paused
    (SIGSTOP) across it and resumed 3 s after the server is back: it was only disconnected,
    so the first must neither reap nor report it as gone."""
    url = databases.create(server.embedded.url(), "restart")
    with connect.connect(url) as conn:
        migrate.migrate(conn)
        tj.create_tables(conn)
    caplog.set_level(logging.INFO, logger="ferryman.queue")
    # a poll interval of an hour: only the notifier and the reconnect can wake the lanes
    with (
        in_process(url, "default:2", poll_interval=3600) as worker,
        subprocesses(url, 1, lanes="default:1") as (paused,),
    ):
        _run_one(url, n=0)
        ids = {r["id"] for r in _workers(url)}
        assert len(ids) == 2 and worker.worker_id in ids
        paused.proc.send_signal(signal.SIGSTOP)
        server.stop()
        time.sleep(OUTAGE)  # the outage itself
        server.start()
        up = time.monotonic()
        time.sleep(2.0)
        latency = _run_one(url, n=1)
        assert latency < 0.5, f"a job enqueued 2 s after the restart waited {latency:.2f} s"
        time.sleep(max(0.0, up + 3.0 - time.monotonic()))  # the paused worker stays away 3 s
        paused.proc.send_signal(signal.SIGCONT)
        wait_for(
            lambda: {r["id"] for r in _workers(url) if r["alive"]} == ids,
            10,
            "both workers registered again under their own ids",
        )
        # read before the block ends: leaving it SIGKILLs the paused worker, and the first
        # worker, still running for a moment, rightly reaps it (its next liveness check)
        reaped = [
            r.getMessage()
            for r in caplog.records
            if "died or lost its connection" in r.getMessage()
        ]
    assert reaped == []
    assert any("listening again" in r.getMessage() for r in caplog.records)


def test_the_dead_claims_sweep_keeps_a_paused_workers_claim_and_frees_a_killed_ones(
    db_url: str,
) -> None:
    """What reaping a worker may free: only claims whose lock nobody holds. A SIGSTOPped
    worker keeps its connections, so its claim survives the sweep; SIGKILLed, it is freed."""
    with connect.connect(db_url) as conn:
        tj.create_tables(conn)
    with subprocesses(db_url, 1, lanes="default:1") as (paused,):
        with connect.connect(db_url) as conn:
            job_id = enqueue(tj.hold, conn=conn)
        started = "SELECT count(*) FROM test_started WHERE job_id = %s"
        wait_for(lambda: scalar(db_url, started, (job_id,)) == 1, 30, f"job {job_id} to start")
        paused.proc.send_signal(signal.SIGSTOP)
        try:
            assert _sweep(db_url) == []
            assert _claimed_by_a_live_backend(db_url, job_id)
        finally:
            paused.proc.send_signal(signal.SIGCONT)
        paused.kill()
        wait_for(lambda: not _claimed_by_a_live_backend(db_url, job_id), 10, "its backend to exit")
        assert _sweep(db_url) == [{"queue": "default", "freed": 1}]


def _sweep(url: str) -> list[dict[str, object]]:
    """The sweep every worker runs when another is reaped (queries.sql free_dead_claims)."""
    with connect.connect(url) as conn:
        return conn.execute(queries.get("free_dead_claims")).fetchall()


def _claimed_by_a_live_backend(url: str, job_id: int) -> bool:
    return bool(
        scalar(
            url,
            "SELECT EXISTS (SELECT 1 FROM ferryman_jobs j JOIN pg_stat_activity a"
            " ON a.pid = j.claimed_by WHERE j.id = %s)",
            (job_id,),
        )
    )


def _workers(url: str) -> list[dict[str, object]]:
    with connect.connect(url) as conn:
        return conn.execute(
            "SELECT id, EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.backend_pid)"
            " AS alive FROM ferryman_workers w"
        ).fetchall()


def _run_one(url: str, n: int) -> float:
    """Enqueue a job and return the seconds from its commit to its start."""
    with connect.connect(url) as conn:
        job_id = enqueue(tj.record, n=n, conn=conn)
        committed = time.time()
    wait_for(
        lambda: scalar(url, "SELECT count(*) FROM test_runs WHERE job_id = %s", (job_id,)) == 1,
        15,
        f"job {job_id}",
        interval=0.01,
    )
    started = scalar(
        url, "SELECT extract(epoch FROM started_at) FROM test_runs WHERE job_id = %s", (job_id,)
    )
    return float(started) - committed
