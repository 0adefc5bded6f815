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

Which writer a kind gets (``writers.writer_for``): the run's mapping, if it maps the kind (a
statement generated from it, see ``generate``); else the provider's own SQL function, if it has
one; else the landing table ``ferryman_landing``, where each record lands as jsonb. Which
mapping a run has, and what it keeps of it, is ``admission``'s. This module only re-exports
them.
"""

from __future__ import annotations

from ferryman_worker.destinations.admission import builtin, mapping_for, snapshot
from ferryman_worker.destinations.writers import (
    FunctionWriter,
    StatementWriter,
    UpdatingFunctionWriter,
    Writer,
    landing,
    versions_for,
    writer_for,
)

__all__ = [
    "FunctionWriter",
    "StatementWriter",
    "UpdatingFunctionWriter",
    "Writer",
    "builtin",
    "landing",
    "mapping_for",
    "snapshot",
    "versions_for",
    "writer_for",
]
