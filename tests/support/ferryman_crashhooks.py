"""Crash points for the reaper's tests. A worker subprocess that imports this module
(``FERRYMAN_IMPORTS=ferryman_crashhooks``) SIGKILLs itself at the point
``FERRYMAN_TEST_CRASH_AT`` names, the way a node failure or an OOM kill would, and nowhere else:

- ``walk`` or ``walk:<cursor_key>``: as a task's walk starts (every task's, or that one's);
- ``barrier``: in the finishing task's last transaction, after its task is marked done and the
  phase found closed, before the barrier advances the phase (or finishes the run).

Nothing in ``ferryman_worker`` knows about it: it replaces module functions in this process.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from ferryman_worker.engine import phases, walks
from ferryman_worker.engine.scope import Scope
from ferryman_worker.providers import Provider

POINT = os.environ.get("FERRYMAN_TEST_CRASH_AT", "")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


_walk = walks.walk
_close_if_done = phases.close_if_done


def _crashing_walk(scope: Scope) -> None:
    wanted = POINT.partition(":")[2]
    if not wanted or scope.task["cursor_key"] == wanted:
        _die()
    _walk(scope)


def _crashing_close(conn: Any, run: dict[str, Any], provider: Provider) -> None:
    if phases.open_tasks(conn, run["id"], int(run["phase"])) == 0:
        _die()
    _close_if_done(conn, run, provider)


if POINT.startswith("walk"):
    walks.walk = _crashing_walk
elif POINT == "barrier":
    phases.close_if_done = _crashing_close
