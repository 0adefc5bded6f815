"""``ferryman mapping check | sample | schema``: a mapping tried by hand before a run uses it."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any, TextIO

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.destination_policy import Policy
from ferryman_worker.destinations import catalog, generate, pointers, reference
from ferryman_worker.destinations.mapping import Mapping
from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import Provider

Records = dict[str, list[dict[str, Any]]]
SAMPLE_RUN = 0
"""The run id of a sample's ledger slots (rolled back with the sample)."""


def check(
    conn: Connection,
    mapping: Mapping,
    out: TextIO,
    provider: Provider | None = None,
    allowed: Policy | None = None,
) -> int:
    """Print every problem (one a line) and return 1, or say the mapping fits and return 0.
    With ``provider``, the mapping as a run of it reads it (each ``sourceId`` it leaves out is
    the provider's declared id), and every pointer it reads checked against the provider's
    fields; ``allowed``: where the installation lets mappings write."""
    problems = []
    if provider is not None:
        if mapping.provider != provider.name:
            problems.append(
                f"provider: the mapping is for {mapping.provider!r}, the provider given is"
                f" {provider.name!r}"
            )
        mapping = pointers.with_provider_ids(mapping, provider)
        problems.extend(pointers.unresolved(mapping, provider))
    problems.extend(catalog.check(conn, mapping, allowed=allowed).problems)
    for problem in problems:
        print(problem, file=out)
    if problems:
        return 1
    fits = "this database" + ("" if provider is None else f" and provider {provider.name!r}")
    print(f"the mapping fits {fits}: {', '.join(mapping.kinds)}", file=out)
    return 0


def schema(out: TextIO) -> int:
    out.write(reference.schema_text())
    return 0


def records_file(path: str) -> Records:
    """``{kind: [record, ...]}`` from a JSON file."""
    try:
        data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"--records {path}: cannot be read as JSON: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ConfigurationError(f"--records {path}: expected {{kind: [record, ...]}}")
    return data


def landed(conn: Connection, workspace: str, kinds: list[str], limit: int) -> Records:
    """The first ``limit`` records of each kind that landed in ``workspace``."""
    query = queries.get("landing", "destinations.sql")
    return {
        kind: [
            row["record"]
            for row in conn.execute(query, {"workspace": workspace, "kind": kind, "limit": limit})
        ]
        for kind in kinds
    }


def sample(
    conn: Connection,
    mapping: Mapping,
    records: Records,
    workspace: str,
    limit: int,
    out: TextIO,
    show: Callable[[list[dict[str, Any]]], None],
    allowed: Policy | None = None,
) -> int:
    """Write up to ``limit`` records of each kind, in phase order, inside a transaction that is
    rolled back, and show each kind's rows as written (references resolved) and each record the
    database refused, with its reason. The sampled kinds' ledger slots of ``workspace`` are set
    aside inside the same transaction, so records already imported (or landed) are written too.
    ``allowed``: where the installation lets mappings write."""
    report = catalog.check(conn, mapping, allowed=allowed)
    if report.problems:
        for problem in report.problems:
            print(problem, file=out)
        return 1
    order = [k for phase in mapping.phases_for([list(mapping.kinds)], {}) for k in phase]
    with conn.transaction(force_rollback=True):
        conn.execute(
            queries.get("set_aside_slots", "destinations.sql"),
            {"workspace": workspace, "kinds": order},
        )
        for kind in order:
            statement = generate.statement(mapping.kinds[kind], report.catalogs[kind], "rows")
            print(f"{kind} -> {mapping.kinds[kind].table}", file=out)
            for record in records.get(kind, [])[:limit]:
                reason = _write_one(conn, statement, record, workspace, kind)
                if reason:
                    print(f"  refused {record.get('id')!r}: {reason}", file=out)
            show(_written(conn, mapping, kind, workspace))
    print("(rolled back: nothing was written)", file=out)
    return 0


def _write_one(
    conn: Connection, statement: bytes, record: dict[str, Any], workspace: str, kind: str
) -> str | None:
    params = {"rows": Jsonb([record]), "workspace": workspace, "kind": kind, "run_id": SAMPLE_RUN}
    try:
        with conn.transaction():
            conn.execute(statement, params)
    except psycopg.Error as exc:
        return (exc.diag.message_primary or str(exc)).strip()
    return None


def _written(conn: Connection, mapping: Mapping, kind: str, workspace: str) -> list[dict[str, Any]]:
    mapped = mapping.kinds[kind]
    query = sql.SQL(
        "SELECT l.source_id AS source, t.* FROM {table} t JOIN ferryman_ledger l"
        " ON l.row_id = t.{id} WHERE l.workspace = %s AND l.kind = %s AND l.run_id = %s"
        " ORDER BY t.{id}"
    ).format(table=sql.Identifier(*mapped.table.split(".")), id=sql.Identifier(mapped.id))
    return conn.execute(query, (workspace, kind, SAMPLE_RUN)).fetchall()
