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


def make_pool(
    url: str, size: int, *, name: str = "ferryman"
) -> psycopg_pool.ConnectionPool[Connection]:
    """A fixed-size pool of autocommit, dict-row connections that drop their locks on return."""
    pool: psycopg_pool.ConnectionPool[Connection] = psycopg_pool.ConnectionPool(
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
