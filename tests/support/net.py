"""Waiting in tests: a free loopback port for a server a test starts, and ``wait_for``, the one
way a test waits for something that happens elsewhere (a worker's job, a controller's write, an
operator's log line).

``wait_for`` polls a check; it never sleeps a fixed time in place of a condition, and when the
time is up it fails naming what it waited for. A check says "not yet" by returning something
falsy or by raising AssertionError (the last one is chained to the failure, so its message is
shown); it says "never" by raising ``Hopeless``, which ends the wait at once: a check that sees
the process it watches exit need not let the wait run out its timeout."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any


class Hopeless(AssertionError):
    """What a check raises when the condition it waits for can no longer come (the process
    exited, the run ended in another state): ``wait_for`` fails at once with it."""


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on: the kernel's pick, released on return, so
    the server a test starts next can bind it (or a client finds it closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(
    check: Callable[[], Any],
    timeout: float = 30,
    what: str | None = None,
    interval: float = 0.05,
) -> Any:
    """Call ``check`` every ``interval`` seconds until it returns something truthy, and return
    that. Once ``timeout`` seconds have passed (and a last call after them said "not yet"),
    AssertionError "timed out after {timeout} s waiting for {what}", chained to the check's
    last AssertionError; ``what`` defaults to the check's name. ``Hopeless`` from the check
    ends the wait at once."""
    deadline = time.monotonic() + timeout
    while True:
        failure: AssertionError | None = None
        try:
            result = check()
        except Hopeless:
            raise
        except AssertionError as error:
            failure = error
        else:
            if result:
                return result
        if time.monotonic() > deadline:
            awaited = what or getattr(check, "__qualname__", repr(check))
            raise AssertionError(
                f"timed out after {timeout:g} s waiting for {awaited}"
            ) from failure
        time.sleep(interval)
