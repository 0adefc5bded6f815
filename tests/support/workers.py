"""Running capsule workers in tests: in this process (threads) or as real subprocesses of
``ferryman worker`` that a test can SIGKILL."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from net import Hopeless, wait_for

from ferryman_worker.db import connect
from ferryman_worker.queue.worker import Worker
from ferryman_worker.settings import Settings

SUPPORT = pathlib.Path(__file__).resolve().parent


@contextlib.contextmanager
def in_process(db_url: str, lanes: str = "default:4", **settings: Any) -> Iterator[Worker]:
    """A worker on threads of this process, stopped at exit."""
    import ferryman_testjobs  # noqa: F401  (registers the test jobs)

    worker = Worker(Settings(lanes=lanes, **settings), db_url)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop(grace=10)


class Subprocess:
    """``ferryman worker`` as a child process."""

    def __init__(self, db_url: str, lanes: str, extra_env: dict[str, str] | None = None) -> None:
        env = dict(os.environ)
        env.update(
            {
                "FERRYMAN_DATABASE_URL": db_url,
                "PYTHONPATH": str(SUPPORT),
                "FERRYMAN_IMPORTS": "ferryman_testjobs",
                **(extra_env or {}),
            }
        )
        self._log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by stop())
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ferryman_worker.cli",
                "--log-level",
                "WARNING",
                "worker",
                "--lanes",
                lanes,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            text=True,
        )
        self.db_url = db_url

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the process registered itself (its threads run)."""
        wait_for(lambda: self._registered(), timeout, f"worker {self.pid} to start")

    def _registered(self) -> bool:
        if self.proc.poll() is not None:
            raise Hopeless(f"worker exited with {self.proc.returncode}: {self.stderr()}")
        with connect.connect(self.db_url) as conn:
            row = conn.execute("SELECT 1 FROM ferryman_workers WHERE pid = %s", (self.pid,))
            return row.fetchone() is not None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()

    def terminate(self, timeout: float = 60.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stderr(self) -> str:
        self._log.seek(0)
        return self._log.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


@contextlib.contextmanager
def subprocesses(
    db_url: str, count: int, lanes: str = "default:4", extra_env: dict[str, str] | None = None
) -> Iterator[list[Subprocess]]:
    """``count`` worker processes, started and ready; killed at exit."""
    procs = [Subprocess(db_url, lanes, extra_env) for _ in range(count)]
    try:
        for proc in procs:
            proc.wait_ready()
        yield procs
    finally:
        for proc in procs:
            proc.stop()


def scalar(db_url: str, query: str, params: tuple[Any, ...] = ()) -> Any:
    with connect.connect(db_url) as conn:
        row = conn.execute(query, params).fetchone()  # type: ignore[arg-type]
        assert row is not None
        return next(iter(row.values()))
