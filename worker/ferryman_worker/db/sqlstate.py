"""Which refusals of PostgreSQL trying again cannot mend, told by their SQLSTATE class.

A statement refused for what it says or what the database now is (a bad value, a constraint, a
missing table or column, a revoked privilege, a limit) is refused the same way the next time:
it is *permanent*. Everything else is *transient* and worth another attempt: a lost connection
(no SQLSTATE, or class 08), a serialization failure or deadlock (40), insufficient resources
(53), an operator's intervention (57: a cancelled statement, a shutdown or restart), a system
error (58), a lock not available (55), a read-only transaction after a failover (25), and any
class not listed here.
"""

from __future__ import annotations

import psycopg

PERMANENT_CLASSES = {
    "0A": "feature not supported",
    "21": "cardinality violation",
    "22": "data exception",
    "23": "integrity constraint violation",
    "42": "syntax error or access rule violation",
    "44": "WITH CHECK OPTION violation",
    "54": "program limit exceeded",
}


def permanent(exc: BaseException) -> bool:
    """Whether ``exc`` is PostgreSQL refusing a statement in a way trying again cannot mend."""
    return isinstance(exc, psycopg.Error) and (exc.sqlstate or "")[:2] in PERMANENT_CLASSES


def describe(exc: psycopg.Error) -> str:
    """The database's message, first line, with its SQLSTATE: ``42501 permission denied ...``."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{exc.sqlstate} {first}" if exc.sqlstate else first
