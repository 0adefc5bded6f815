"""The worker's health endpoint (/livez, /readyz), asked over HTTP of a real `ferryman worker`
process, as the kubelet's probes ask it."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import ferryman_testjobs as tj
import httpx
import pytest
from net import free_port, wait_for
from workers import Subprocess, scalar

from ferryman_worker.db import connect
from ferryman_worker.queue import enqueue

HEARTBEAT = 0.5


def get(port: int, path: str) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5)


def status(port: int, path: str) -> int | None:
    try:
        return get(port, path).status_code
    except httpx.TransportError:
        return None


@pytest.fixture
def worker(db_url: str) -> Iterator[tuple[Subprocess, int]]:
    with connect.connect(db_url) as conn:
        tj.create_tables(conn)
    port = free_port()
    env = {"FERRYMAN_METRICS_PORT": str(port), "FERRYMAN_HEARTBEAT_INTERVAL": str(HEARTBEAT)}
    proc = Subprocess(db_url, "default:2", env)
    try:
        proc.wait_ready()
        yield proc, port
    finally:
        proc.stop()


def test_a_running_worker_is_live_and_ready(worker: tuple[Subprocess, int]) -> None:
    _, port = worker
    wait_for(lambda: status(port, "/readyz") == 200, 10, "/readyz 200")
    ready = get(port, "/readyz")
    assert ready.text == "lanes default:2 running\n"
    assert ready.headers["content-type"].startswith("text/plain")
    assert get(port, "/livez").status_code == 200
    missing = get(port, "/nothing-here")
    assert missing.status_code == 404 and "/livez" in missing.text


def test_a_stuck_heartbeat_makes_the_worker_not_live_until_it_beats_again(
    worker: tuple[Subprocess, int], db_url: str
) -> None:
    _, port = worker
    wait_for(lambda: status(port, "/livez") == 200, 10, "/livez 200")
    # A lock on the workers' table blocks the heartbeat's UPDATE: the thread is stuck, as it
    # would be behind a hung database. Lanes and notifier go on, so the worker stays ready.
    with connect.connect(db_url) as conn, conn.transaction():
        conn.execute("LOCK TABLE ferryman_workers IN ACCESS EXCLUSIVE MODE")
        wait_for(lambda: status(port, "/livez") == 503, 10 * HEARTBEAT + 5, "/livez 503")
        assert get(port, "/livez").text.startswith("no heartbeat for ")
        assert get(port, "/readyz").status_code == 200
    wait_for(lambda: status(port, "/livez") == 200, 3 * HEARTBEAT + 5, "/livez 200 again")


def test_a_worker_that_lost_its_connections_is_not_ready_until_it_listens_again(
    worker: tuple[Subprocess, int], db_url: str
) -> None:
    proc, port = worker
    wait_for(lambda: status(port, "/readyz") == 200, 10, "/readyz 200")
    seen: list[int | None] = []
    with connect.connect(db_url) as conn:
        killed = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    assert killed, "the worker's connections were not found"
    # The notifier waits 1 s before it reconnects: /readyz answers 503 meanwhile.
    wait_for(lambda: seen.append(status(port, "/readyz")) or seen[-1] == 503, 5, "/readyz 503")
    wait_for(lambda: status(port, "/readyz") == 200, 10, "/readyz 200 after the reconnect")
    assert proc.proc.poll() is None


def test_a_worker_shutting_down_is_not_ready_but_live(
    worker: tuple[Subprocess, int], db_url: str
) -> None:
    proc, port = worker
    with connect.connect(db_url) as conn:
        enqueue(tj.sleep, 3.0, n=1, conn=conn)
    wait_for(lambda: scalar(db_url, "SELECT count(*) FROM test_started") == 1, 10, "the job")
    proc.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: status(port, "/readyz") == 503, 5, "/readyz 503 on SIGTERM")
    assert get(port, "/readyz").text == "shutting down\n"
    assert get(port, "/livez").status_code == 200  # the job still runs out its grace
    assert proc.proc.wait(30) == 0
    assert scalar(db_url, "SELECT count(*) FROM test_runs") == 1
    assert status(port, "/livez") is None  # the endpoint is gone with the process


def test_off_by_default(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        tj.create_tables(conn)
    proc = Subprocess(db_url, "default:1")
    try:
        proc.wait_ready()
        assert "health endpoint" not in proc.stderr()
    finally:
        proc.stop()


def test_a_taken_port_is_refused_with_the_setting_to_change(db_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "ferryman_worker.cli", "worker", "--metrics-port", str(port)],
            env={"FERRYMAN_DATABASE_URL": db_url, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2, result.stderr
    assert "FERRYMAN_METRICS_PORT" in result.stderr and f"port {port}" in result.stderr
    assert "Traceback" not in result.stderr


def test_readyz_names_a_lane_thread_that_keeps_failing(
    worker: tuple[Subprocess, int], db_url: str
) -> None:
    """A job that raises SystemExit at every attempt keeps a lane thread failing: /readyz says
    503 and names the thread and the error, and 200 again once the job is gone."""
    _, port = worker
    wait_for(lambda: status(port, "/readyz") == 200, 10, "/readyz 200")
    with connect.connect(db_url) as conn:
        exiting = enqueue(tj.exits_always, conn=conn)
        wait_for(lambda: status(port, "/readyz") == 503, 10, "/readyz 503")
        answer = get(port, "/readyz").text
        assert "lane-default-" in answer and "SystemExit" in answer
        conn.execute("UPDATE ferryman_jobs SET status = 'discarded' WHERE id = %s", (exiting,))
        wait_for(lambda: status(port, "/readyz") == 200, 10, "/readyz 200 again")
