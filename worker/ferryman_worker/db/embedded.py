"""An embedded PostgreSQL (the ``pgserver`` package) for local commands when no
``FERRYMAN_DATABASE_URL`` is given: ``make demo``, ``ferryman run``, the benchmarks, the tests.

As root, pgserver runs the server under its own user. pgserver counts the processes using a data
folder; with ``cleanup="stop"`` the last of them to exit stops the server (the CLI's choice),
with None it keeps running; data persists in ``data_dir``.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import signal
import time
import warnings
from typing import Any

from ferryman_worker.db import connect
from ferryman_worker.errors import ConfigurationError, DatabaseError

DEFAULT_DIR = pathlib.Path.home() / ".local" / "share" / "ferryman" / "postgres"


@dataclasses.dataclass
class EmbeddedServer:
    """A running embedded server; ``url(dbname)`` gives a connection URL for a database."""

    data_dir: pathlib.Path
    handle: Any

    def url(self, dbname: str = "postgres") -> str:
        return connect.url_for(str(self.handle.get_uri()), dbname)

    def restart(self) -> None:
        """Restart the server in place (fast shutdown): every connection to it is cut."""
        from pgserver._commands import pg_ctl

        pg_ctl(
            ["-w", "restart", "-m", "fast"],
            pgdata=self.data_dir,
            user=self.handle.system_user,
            timeout=60,
        )

    def crash(self, how: str = "immediate") -> None:
        """Crash the server and start it again (it recovers from its WAL); returns once it
        accepts connections. ``immediate``: ``pg_ctl -m immediate``, no checkpoint, every
        backend killed; ``sigkill``: SIGKILL the postmaster, its orphaned backends exit on
        their own, then the server starts with the options it had (``pg_ctl restart`` reads
        them from ``postmaster.opts``)."""
        from pgserver._commands import pg_ctl

        if how == "sigkill":
            pid = self._live_pid()
            if pid:
                os.kill(pid, signal.SIGKILL)
                _wait_gone(pid, 30.0)
        elif how != "immediate":
            raise ValueError(f"crash how={how!r}: 'immediate' or 'sigkill'")
        mode = ["-m", "immediate"] if how == "immediate" else []
        deadline = time.monotonic() + 60.0
        while True:
            try:
                pg_ctl(
                    ["-w", "restart", *mode],
                    pgdata=self.data_dir,
                    user=self.handle.system_user,
                    timeout=60,
                )
                return
            except Exception:  # a backend of the killed postmaster still holds shared memory
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        """Stop the server (fast shutdown), wait for it to exit, then let pgserver clean up.

        The pid is read from ``postmaster.pid``: pgserver's handle keeps the pid it started, which
        ``restart()`` makes stale, and pgserver's own cleanup leaves the server running while it
        counts another user of the folder (a process that attached and was SIGKILLed counts
        forever): together they left the test session's restarted server running after it."""
        pid = self._live_pid() or self.handle.get_pid()
        if pid:
            _signal_and_wait(int(pid))
        try:
            self.handle.cleanup()  # returns early while it counts other users, even dead ones
        except Exception as exc:  # psutil's NoSuchProcess: the postmaster stopped above is gone
            if type(exc).__name__ != "NoSuchProcess":
                raise
        if self.handle.cleanup_mode == "delete":
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _live_pid(self) -> int | None:
        try:
            first = (self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
        except OSError:
            return None
        return int(first) if first.strip().isdigit() else None


def start(
    data_dir: str | os.PathLike[str] | None = None, *, cleanup: str | None = None
) -> EmbeddedServer:
    """Start (or attach to) the embedded server for ``data_dir``.

    ``cleanup``: None leaves the server running at exit, "stop" stops it, "delete" also deletes
    the data folder.
    """
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError:
        raise ConfigurationError(
            "FERRYMAN_DATABASE_URL is unset and the embedded PostgreSQL is not installed: "
            "set FERRYMAN_DATABASE_URL or `pip install 'ferryman[embedded]'`"
        ) from None
    folder = pathlib.Path(data_dir) if data_dir else DEFAULT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            handle = pgserver.get_server(folder, cleanup_mode=cleanup)
    except Exception as exc:
        raise DatabaseError(f"cannot start the embedded PostgreSQL in {folder}: {exc}") from exc
    return EmbeddedServer(folder, handle)


def _signal_and_wait(pid: int, timeout: float = 120.0) -> None:
    """A fast shutdown, waited for: its checkpoint can take tens of seconds on a loaded machine
    (30 s was once too short in a test run), and a server left stopping would outlive us."""
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    _wait_gone(pid, timeout)


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if _zombie(pid):  # dead, its parent yet to reap it
            return
        time.sleep(0.05)
    warnings.warn(
        f"the embedded PostgreSQL (pid {pid}) did not stop within {timeout:.0f} s; "
        f"stop it with `kill -INT {pid}`",
        RuntimeWarning,
        stacklevel=2,
    )


def _zombie(pid: int) -> bool:
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]
