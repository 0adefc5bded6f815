"""Crash and stop points for the reaper's tests. A worker subprocess that imports this module
(``FERRYMAN_IMPORTS=ferryman_crashhooks``) SIGKILLs itself at the point ``FERRYMAN_TEST_CRASH_AT``
names, the way a node failure or an OOM kill would, and nowhere else:

- ``walk`` or ``walk:<cursor_key>``: as a task's walk starts (every task's, or that one's);
- ``barrier``: in the finishing task's last transaction, after its task is marked done and the
  phase found closed, before the barrier advances the phase (or finishes the run);
- ``fail``: in the transaction that fails a task and its run (``tasks._fail``), after the task's
  failure and before the run's.

It SIGSTOPs itself (the test sends SIGCONT) at each point ``FERRYMAN_TEST_STOP_AT`` names (a
comma list), the first time it gets there, after adding the point's name as a line to the file
``FERRYMAN_TEST_STOP_LOG``, so a test can act at that moment:

- ``walk``: as a task's walk starts (its task claimed);
- ``gate``: as a window the gate refused looks at its run (``Scope.gate``);
- ``barrier``: where ``barrier`` above would kill it (the phase found closed, the run row
  locked, the finishing task's last transaction open).

Nothing in ``ferryman_worker`` knows about it: it replaces module functions in this process.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from ferryman_worker.db import queries
from ferryman_worker.engine import phases, tasks, walks
from ferryman_worker.engine.scope import Scope
from ferryman_worker.providers import Provider

POINT = os.environ.get("FERRYMAN_TEST_CRASH_AT", "")
STOPS = set(filter(None, os.environ.get("FERRYMAN_TEST_STOP_AT", "").split(",")))
STOP_LOG = os.environ.get("FERRYMAN_TEST_STOP_LOG", os.devnull)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _stop(point: str) -> None:
    if point in STOPS:
        STOPS.discard(point)
        with open(STOP_LOG, "a") as log:  # which stop this is, for the test that waits on it
            log.write(point + "\n")
        # to this thread, so it stops here (the signal stops every thread of the process)
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)


_walk = walks.walk
_close_if_done = phases.close_if_done
_fail = tasks._fail
_gate = Scope.gate


def _crashing_walk(scope: Scope) -> None:
    wanted = POINT.partition(":")[2]
    if not wanted or scope.task["cursor_key"] == wanted:
        _die()
    _walk(scope)


def _crashing_close(conn: Any, run: dict[str, Any], provider: Provider) -> None:
    if phases.open_tasks(conn, run["id"], int(run["phase"])) == 0:
        _die()
    _close_if_done(conn, run, provider)


def _stopping_close(conn: Any, run: dict[str, Any], provider: Provider) -> None:
    if phases.open_tasks(conn, run["id"], int(run["phase"])) == 0:
        _stop("barrier")
    _close_if_done(conn, run, provider)


class _DiesBeforeFailingTheRun:
    """The job's connection, but the process dies as the run's failure is sent."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def transaction(self) -> Any:
        return self._conn.transaction()

    def execute(self, query: str, params: Any = None) -> Any:
        if query == queries.engine("finish_run"):
            _die()
        return self._conn.execute(query, params)


def _crashing_fail(conn: Any, *args: Any) -> None:
    _fail(_DiesBeforeFailingTheRun(conn), *args)


def _stopping_walk(scope: Scope) -> None:
    _stop("walk")
    _walk(scope)


def _stopping_gate(self: Scope, conn: Any) -> None:
    _stop("gate")
    _gate(self, conn)


if POINT.startswith("walk"):
    walks.walk = _crashing_walk
elif POINT == "barrier":
    phases.close_if_done = _crashing_close
elif POINT == "fail":
    tasks._fail = _crashing_fail
if "walk" in STOPS:
    walks.walk = _stopping_walk
if "gate" in STOPS:
    Scope.gate = _stopping_gate  # type: ignore[method-assign]
if "barrier" in STOPS:
    phases.close_if_done = _stopping_close
