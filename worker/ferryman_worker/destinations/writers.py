"""The writer of a kind in a run (``writer_for``) and the statements it writes a window with.

Which writer a kind gets: the run's mapping, if it maps the kind (statements generated from the
mapping snapshot, see ``generate``); else the provider's own SQL function, if it has one
(``Provider.writer``); else the landing table ``ferryman_landing``, where each record lands as
jsonb. Every writer is given the named parameters the package's front describes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, Protocol

from psycopg import sql

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.destination_policy import Policy, qualified
from ferryman_worker.destinations import generate
from ferryman_worker.destinations.mapping import parse
from ferryman_worker.errors import MappingInvalid
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


@dataclasses.dataclass(frozen=True)
class StatementWriter:
    """A writer that is a statement composed by ferryman: generated from a mapping, or the
    landing table's."""

    window: bytes
    rows: bytes

    def window_statement(self) -> bytes:
        return self.window

    def rows_statement(self) -> bytes:
        return self.rows

    def problems(self, conn: Connection) -> list[str]:
        return []  # checked with its mapping at admission (catalog.check)


@dataclasses.dataclass(frozen=True)
class UpdatingFunctionWriter(FunctionWriter):
    """A provider's SQL function in a delta run: it can only insert, so the run is refused."""

    def problems(self, conn: Connection) -> list[str]:
        return [
            f"a delta run updates the rows of changed records, and the SQL function"
            f" {self.function} can only insert them: map the kind (spec.mapping), or run it"
            " with mode Full"
        ]


@functools.cache
def _generated(
    snapshot: str, kind: str, versions: generate.Versions, allowed: Policy
) -> StatementWriter:
    """The statements of ``kind`` generated from a run's mapping snapshot (as JSON text),
    validated again as admission validated it (the row is data: the mapping by its model, the
    catalog by its, the tables by the installation's ``allowed``); MappingInvalid if not."""
    data = json.loads(snapshot)
    mapped = parse(data.get("mapping"), source="the run's stored mapping").kinds.get(kind)
    if mapped is None:
        raise MappingInvalid(f"the run's stored mapping has no kind {kind!r}")
    found = generate.KindCatalog.from_json((data.get("catalog") or {}).get(kind))
    joins = (
        found.joins if len(found.joins) == len(mapped.joins) else [j.table for j in mapped.joins]
    )
    found = found.model_copy(  # a name kept unqualified is read as the writer checks it
        update={
            "table": qualified(found.table or mapped.table, allowed.schemas),
            "joins": tuple(qualified(table, allowed.schemas) for table in joins),
        }
    )
    at = f"the run's stored mapping: kinds.{kind}"
    problems = [
        allowed.table_refused(found.table or mapped.table, f"{at}.table"),
        *(
            allowed.table_refused(table, f"{at}.joins[{index}].table")
            for index, table in enumerate(found.joins)
        ),
        None if mapped.workspace_column else allowed.unscoped_refused(mapped.table, at),
    ]
    refused = [problem for problem in problems if problem is not None]
    if refused:
        raise MappingInvalid("; ".join(refused))
    return StatementWriter(
        generate.statement(mapped, found, "window", versions),
        generate.statement(mapped, found, "rows", versions),
    )


@functools.cache
def landing(source_id: str = "/id", versions: generate.Versions = generate.FULL) -> StatementWriter:
    """The writer of a kind without a mapping: its records land as jsonb in
    ``ferryman_landing`` (workspace, kind, source id, record, run)."""
    return StatementWriter(
        generate.landing_statement(source_id, "window", versions),
        generate.landing_statement(source_id, "rows", versions),
    )


def versions_for(run: dict[str, Any], provider: Provider, kind: str) -> generate.Versions:
    """How ``kind``'s records are versioned (its provider's ``changedSince.version``, else a
    hash of the record), and whether ``run`` is a delta."""
    declared = provider.kinds.get(kind)
    changed = declared.changed_since if declared is not None else None
    delta = (run.get("options") or {}).get("mode") == "delta"
    if changed is None or not changed.version:
        return generate.Versions(delta=delta)
    pointer = "/" + changed.version.replace("~", "~0").replace("/", "~1")
    return generate.Versions(pointer, changed.version_type, delta)


def writer_for(
    run: dict[str, Any], provider: Provider, kind: str, allowed: Policy | None = None
) -> Writer:
    """The writer of ``kind`` in ``run``: generated from the run's mapping if it maps the kind
    (into a table the installation's ``allowed`` destinations hold: MappingInvalid if not);
    else the provider's own SQL function, if it names one; else the landing table."""
    snapshot = run.get("mapping")
    versions = versions_for(run, provider, kind)
    if snapshot and kind in (snapshot.get("mapping") or {}).get("kinds", {}):
        text = json.dumps(snapshot, sort_keys=True)
        return _generated(text, kind, versions, allowed or Policy())
    name = provider.writer(kind)
    if name:
        return UpdatingFunctionWriter(name) if versions.delta else FunctionWriter(name)
    declared = provider.kinds.get(kind)
    return landing(declared.id_pointer if declared is not None else "/id", versions)
