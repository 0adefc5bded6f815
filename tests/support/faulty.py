"""A faulty run for the observability tests: the demo CRM with injected 5xx, 429s (a small
token budget), malformed records and deals gone since their listing, migrated by a real
``ferryman worker`` process whose database URL carries a password and whose source token is a
recognisable secret, so its logs and metrics can be searched for both."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import psycopg
from migration import SECRET
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker.engine.runtime import credential_env_var

TOKEN = "tok-Secret-7f3a9c1e-do-not-log"
PASSWORD = "pw-Secret-41d2b8-do-not-log"
DATASET: dict[str, Any] = {
    "organizations": 900,
    "people": 300,
    "deals": 40,
    "messages_per_deal": 3,
    "malformed_rate": 0.02,
    "gone_deal_rate": 0.1,
}


def with_password(db_url: str) -> str:
    """``db_url`` with a password (the embedded server trusts local connections, so it is
    accepted and ignored: it is there only to be looked for)."""
    return psycopg.conninfo.make_conninfo(db_url, password=PASSWORD)


@contextlib.contextmanager
def faulty_crm(**changes: Any) -> Iterator[DemoCRM]:
    """The demo CRM accepting ``TOKEN`` only, with 8 % 5xx and a budget that answers 429s."""
    options = {
        "seed": 23,
        "budget_capacity": 100,
        "budget_refill_per_s": 600,
        "error_rate": 0.08,
        **DATASET,
        **changes,
    }
    with DemoCRM.start(api_key=TOKEN, **options) as crm:
        yield crm


class WorkerProcess:
    """``ferryman worker`` as a child process, its stderr (the log) kept in a file."""

    def __init__(self, db_url: str, *args: str, env: dict[str, str] | None = None) -> None:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("FERRYMAN_LOG")}
        environment.update(
            {
                "FERRYMAN_DATABASE_URL": with_password(db_url),
                credential_env_var(SECRET["name"], SECRET["key"]): TOKEN,
                "FERRYMAN_HEARTBEAT_INTERVAL": "1",
                **(env or {}),
            }
        )
        self._log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by stop())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ferryman_worker.cli", "worker", *args],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            text=True,
        )

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read()

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, and the exit code (SIGKILL after ``timeout``)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def close(self) -> None:
        self.stop()
        self._log.close()


@contextlib.contextmanager
def worker_process(
    db_url: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[WorkerProcess]:
    worker = WorkerProcess(db_url, *args, env=env)
    try:
        yield worker
    finally:
        worker.close()
