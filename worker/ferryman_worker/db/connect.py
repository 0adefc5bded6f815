"""Connections and pools. The one place psycopg's connection errors become ours.

Every pooled connection is reset when it goes back to the pool: ``pg_advisory_unlock_all()``,
so no claim or lock ever outlives the job that took it.
"""

from __future__ import annotations

from typing import Any

import psycopg
import psycopg_pool
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg_pool.base import AttemptWithBackoff

from ferryman_worker.errors import DatabaseError

Connection = psycopg.Connection[dict[str, Any]]
APPLICATION_NAME = "ferryman"


def url_for(url: str, dbname: str) -> str:
    """``url`` pointing at database ``dbname`` (host or socket URLs alike)."""
    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo(**params)  # type: ignore[arg-type]


def connect(url: str, *, autocommit: bool = True) -> Connection:
    """One connection, rows as dicts, autocommit by default (use ``conn.transaction()``)."""
    try:
        return psycopg.connect(
            url, autocommit=autocommit, row_factory=dict_row, application_name=APPLICATION_NAME
        )
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"cannot connect to PostgreSQL: {_first_line(exc)}") from None


def _reset(conn: psycopg.Connection[object]) -> None:
    conn.execute("SELECT pg_advisory_unlock_all()")


RECONNECT_EVERY = 0.5
"""Longest wait between two attempts to replace a lost connection: the pool is back within
this long of the server accepting connections again, however long it was away."""


class _Reconnect(AttemptWithBackoff):
    """psycopg_pool's backoff (1 s, doubling: 16-32 s late after a 30 s outage), capped."""

    INITIAL_DELAY = 0.1

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, RECONNECT_EVERY)


class Pool(psycopg_pool.ConnectionPool[Connection]):
    """A ConnectionPool whose lost connections are retried at least every RECONNECT_EVERY."""

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        # psycopg_pool 3.2/3.3 hands each lost connection a fresh attempt; give it ours.
        super()._add_connection(attempt or _Reconnect(timeout=self.reconnect_timeout), growing)


def make_pool(
    url: str, size: int, *, name: str = "ferryman"
) -> psycopg_pool.ConnectionPool[Connection]:
    """A fixed-size pool of autocommit, dict-row connections that drop their locks on return
    and come back within RECONNECT_EVERY of the server's return."""
    pool: psycopg_pool.ConnectionPool[Connection] = Pool(
        url,
        min_size=size,
        max_size=size,
        name=name,
        open=False,
        reset=_reset,
        check=psycopg_pool.ConnectionPool.check_connection,
        kwargs={
            "autocommit": True,
            "row_factory": dict_row,
            "application_name": APPLICATION_NAME,
        },
        reconnect_timeout=24 * 3600,
    )
    return pool


def open_pool(pool: psycopg_pool.ConnectionPool[Connection], timeout: float = 30.0) -> None:
    """Open ``pool``, waiting for its connections; DatabaseError says what to check."""
    try:
        pool.open(wait=True, timeout=timeout)
    except psycopg_pool.PoolTimeout:
        pool.close()
        raise DatabaseError(
            f"cannot open {pool.max_size} connections to PostgreSQL within {timeout:.0f}s: "
            "check FERRYMAN_DATABASE_URL and the server's max_connections"
        ) from None


def _first_line(exc: BaseException) -> str:
    """The error's first line (psycopg's messages name host and port, never the password)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
