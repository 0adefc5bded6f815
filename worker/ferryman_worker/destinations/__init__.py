"""Destinations: where a kind's records are written, and the writer that writes a window of them.

The boundary with ``providers``: a provider yields, per kind, *records*: JSON objects validated
by the kind's record model, each naming its source id in the kind's id field. It knows nothing
of tables. A destination takes a window of those records (a jsonb array, in order) and, in ONE
statement, writes them, claims their ledger slots (workspace, kind, source id -> destination row
id, run) and resolves their references; a record whose slot is already taken makes the statement
fail on the ledger's key (``ferryman_ledger_pkey``), and the engine then writes the window again
row by row. The engine owns everything around that statement: windows, the checkpoint, row
errors, the gate.

Every writer is given the same named parameters: ``rows`` (jsonb array of records), ``workspace``,
``kind`` and ``run_id``; a window statement also ``task_id``, ``job_id``, ``offset`` and ``errors``
(see ``queries.sql``: write_window, write_rows).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Protocol

from psycopg import sql

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.providers import Provider


class Writer(Protocol):
    """What the engine needs to write one kind."""

    def window_statement(self) -> bytes:
        """The window in one statement: rows, ledger slots, then ``ferryman_close_window``
        (row errors, checkpoint, gate). Returns one row: the row errors recorded now."""
        ...

    def rows_statement(self) -> bytes:
        """The rows alone (a careful window writes them one by one with it). Returns one row:
        how many rows it wrote."""
        ...

    def problems(self, conn: Connection) -> list[str]:
        """What stops this writer in this database, one line each naming the fix; empty when
        it can write. Checked at admission, before any task exists."""
        ...


@dataclasses.dataclass(frozen=True)
class FunctionWriter:
    """A writer that is an SQL function ``(rows jsonb, workspace text, kind text, run_id bigint)
    RETURNS integer``, installed by a migration (a Python provider's own tables)."""

    function: str

    def window_statement(self) -> bytes:
        return _with_function("write_window", self.function)

    def rows_statement(self) -> bytes:
        return _with_function("write_rows", self.function)

    def problems(self, conn: Connection) -> list[str]:
        row = conn.execute(
            queries.engine("missing_writers"), {"writers": [self.function]}
        ).fetchone()
        if row and row["missing"]:
            return [
                f"the SQL function {self.function} is missing: run `ferryman db migrate` (it "
                "applies ferryman's migrations and those every installed plug-in registers "
                "under 'ferryman.migrations')"
            ]
        return []


@functools.cache
def _with_function(name: str, function: str) -> bytes:
    """Named query ``name`` with ``function`` in place of ``{writer}``."""
    statement = sql.SQL(queries.engine(name)).format(writer=sql.Identifier(function))
    return statement.as_bytes(None)  # composed once: identifiers need no connection to quote


def writer_for(run: dict[str, Any], provider: Provider, kind: str) -> Writer:
    """The writer of ``kind`` in ``run``: today the provider's own SQL function."""
    return FunctionWriter(provider.writer(kind))
