"""The operator's few database calls, run on threads (the contract is synchronous psycopg) with
at most ``db_connections`` connections, kept open between calls.

The one place a lost or refused connection becomes ``DatabaseUnavailable``: the caller shows
it on status and tries again later; the connection is dropped and opened anew next time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from ferryman_operator.errors import DatabaseUnavailable
from ferryman_worker import contract

T = TypeVar("T")


class Database:
    """Borrow a connection, call ``fn(conn)`` on a thread, give it back (or drop it if broken).
    ``counted`` is called once per statement sent (``conn.execute``)."""

    def __init__(self, url: str, size: int, counted: Callable[[], None] = lambda: None) -> None:
        self._url = url
        self._slots = asyncio.Semaphore(size)
        self._idle: list[contract.Connection] = []
        self._cursor = _counting(counted)

    async def run(self, fn: Callable[[contract.Connection], T]) -> T:
        async with self._slots:
            conn = self._idle.pop() if self._idle else None
            return await asyncio.to_thread(self._call, conn, fn)

    def _call(self, conn: contract.Connection | None, fn: Callable[[contract.Connection], T]) -> T:
        try:
            if conn is None or conn.closed:
                conn = contract.connect(self._url)
                conn.cursor_factory = self._cursor
            result = fn(conn)
        except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedFunction) as exc:
            self._give_back(conn)
            raise DatabaseUnavailable(
                f"the database lacks ferryman's schema ({_first_line(exc)}): run "
                "`ferryman db migrate` (the chart's migration job does)"
            ) from None
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            _close(conn)
            raise DatabaseUnavailable(_first_line(exc)) from None
        except contract.DatabaseError as exc:
            _close(conn)
            raise DatabaseUnavailable(str(exc)) from None
        except BaseException:
            self._give_back(conn)
            raise
        self._give_back(conn)
        return result

    def _give_back(self, conn: contract.Connection | None) -> None:
        if conn is not None and not conn.closed:
            self._idle.append(conn)

    def close(self) -> None:
        while self._idle:
            _close(self._idle.pop())


def _counting(counted: Callable[[], None]) -> type[psycopg.Cursor[Any]]:
    """A cursor class that calls ``counted`` before each statement it sends."""

    class Counting(psycopg.Cursor[Any]):
        def execute(self, *args: Any, **kwargs: Any) -> Any:
            counted()
            return super().execute(*args, **kwargs)

    return Counting


def _close(conn: contract.Connection | None) -> None:
    if conn is not None:
        with contextlib.suppress(psycopg.Error):
            conn.close()


def _first_line(exc: BaseException) -> str:
    """psycopg's first line names host and port, never the password."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
