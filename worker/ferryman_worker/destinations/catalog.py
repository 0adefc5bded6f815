"""A mapping checked against the database's catalog: every problem one line, naming the mapping's
field and the fix, before any task exists. What the catalog says of each table (column types,
the id's sequence) is resolved here once and kept in the run with the mapping."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.destination_policy import Policy
from ferryman_worker.destinations import generate
from ferryman_worker.destinations.columns import COLUMN_TYPE
from ferryman_worker.destinations.generate import KindCatalog
from ferryman_worker.destinations.mapping import KindMapping, Mapping, OnDeleted, SoftDelete
from ferryman_worker.errors import MappingInvalid

INTEGER_IDS = ("smallint", "integer", "bigint")
"""Destination id types the ledger (``row_id bigint``) can hold."""


def _query(name: str) -> Any:
    return queries.get(name, "destinations.sql")


def quoted(table: str) -> str:
    """``schema.table`` quoted as ``to_regclass`` reads it (parts are lowercase identifiers)."""
    return ".".join(f'"{part}"' for part in table.split("."))


@dataclasses.dataclass
class Report:
    """What the catalog said: each mapped kind's catalog, and the problems found."""

    catalogs: dict[str, KindCatalog] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)


def check(
    conn: Connection,
    mapping: Mapping,
    kinds: list[str] | None = None,
    allowed: Policy | None = None,
) -> Report:
    """Check the mapping's kinds (those in ``kinds``, or all) against the catalog and the
    installation's ``allowed`` destinations (default: its defaults), then the statements
    generated for them (PostgreSQL plans each, so a cast it cannot make is found)."""
    report = Report()
    allowed = allowed or Policy()
    missing = conn.execute(_query("ferryman_tables_missing")).fetchone()
    if missing and missing["missing"]:
        report.problems.append(
            "this database has no ferryman tables (the ledger a mapping writes through): run"
            " `ferryman db migrate` against it first"
        )
        return report
    wanted = [k for k in mapping.kinds if kinds is None or k in kinds]
    for kind in wanted:
        at = f"kinds.{kind}"
        found = _kind(conn, mapping, mapping.kinds[kind], at, report.problems, allowed)
        if found is not None:
            report.catalogs[kind] = found
    for kind, found in report.catalogs.items():
        problem = _plans(conn, mapping.kinds[kind], found)
        if problem is None and mapping.kinds[kind].on_deleted is not OnDeleted.RECORD:
            problem = _plans(conn, mapping.kinds[kind], found, generate.Versions(delta=True))
            problem = problem and f"onDeleted: {problem}"
        if problem:
            report.problems.append(f"kinds.{kind}: PostgreSQL refuses its writer: {problem}")
    return report


def _columns(conn: Connection, table: str) -> dict[str, dict[str, Any]]:
    rows = conn.execute(_query("table_columns"), {"table": quoted(table)}).fetchall()
    return {row["name"]: row for row in rows}


def resolved(conn: Connection, table: str) -> str | None:
    """``table`` as PostgreSQL resolves it, ``schema.table``; None: there is no such table."""
    row = conn.execute(_query("table_resolved"), {"table": quoted(table)}).fetchone()
    return None if row is None else f"{row['schema']}.{row['name']}"


def _kind(
    conn: Connection,
    mapping: Mapping,
    kind: KindMapping,
    at: str,
    problems: list[str],
    allowed: Policy,
) -> KindCatalog | None:
    start = len(problems)
    table = resolved(conn, kind.table)
    if table is None:
        problems.append(
            f"{at}.table: there is no table {kind.table} in this database; ferryman never "
            "creates application tables: create it with the application's own migrations"
        )
        return None
    refused = allowed.table_refused(table, f"{at}.table")
    if refused is not None:
        problems.append(refused)
        return None
    columns = _columns(conn, table)
    problems.extend(_workspace_problems(kind, columns, table, at, allowed))
    types: dict[str, str] = {}
    for name, column in kind.columns.items():
        where = f"{at}.columns.{name}"
        found = columns.get(name)
        if found is None:
            problems.append(f"{where}: {kind.table} has no column {name}; known: {sorted(columns)}")
            continue
        if found["generated"]:
            problems.append(f"{where}: {kind.table}.{name} is a generated column: remove it")
        problems.extend(
            _unmapped(f"{where}.{path}.kind", reference.kind)
            for path, reference in column.references()
            if reference.kind not in mapping.kinds
        )
        types[name] = found["type"]
        if column.cast is not None:
            named = conn.execute(_query("type_named"), {"type": column.cast}).fetchone()
            if named is None or named["type"] is None:
                problems.append(f"{where}.cast: there is no type {column.cast!r} in this database")
            else:
                types[name] = column.cast
    problems.extend(_marked(kind, columns, at, types))
    problems.extend(_id_problems(kind, columns, at))
    problems.extend(
        f"{at}.columns: {kind.table}.{name} is NOT NULL and has no default: map it"
        for name, found in columns.items()
        if found["not_null"]
        and not found["has_default"]
        and name not in kind.columns
        and name != kind.id
    )
    problems.extend(_natural_key_problems(conn, kind, at))
    problems.extend(_type_problems(kind, types, at))
    joins = []
    for index, join in enumerate(kind.joins):
        where = f"{at}.joins[{index}]"
        join_table = resolved(conn, join.table)
        refused = join_table and allowed.table_refused(join_table, f"{where}.table")
        if refused:
            problems.append(refused)
            continue
        joins.append(join_table or join.table)
        problems.extend(_join_problems(conn, mapping, join.table, join, where))
    if len(problems) > start:
        return None
    id_column = columns[kind.id]
    return KindCatalog(
        types=types,
        sequence=id_column["sequence"],
        always=id_column["identity"] == "a",
        table=table,
        joins=tuple(joins),
    )


def _workspace_problems(
    kind: KindMapping, columns: dict[str, dict[str, Any]], table: str, at: str, allowed: Policy
) -> list[str]:
    """The workspace column exists; a table without one is the installation's leave."""
    name = kind.workspace_column
    if name is None:
        refused = allowed.unscoped_refused(table, at)
        return [] if refused is None else [refused]
    if name not in columns:
        return [
            f"{at}.workspaceColumn: {table} has no column {name}; name the column holding each "
            f"row's workspace; known: {sorted(columns)}"
        ]
    return []


def _type_problems(kind: KindMapping, types: dict[str, str], at: str) -> list[str]:
    """Types a writer cannot name (only plain type names go into its statements)."""
    return [
        f"{at}.columns.{name}: {kind.table}.{name} is of type {type_}, which a writer cannot "
        "name: cast it to a plain type (cast: text)"
        for name, type_ in types.items()
        if not re.fullmatch(COLUMN_TYPE, type_)
    ]


def _marked(
    kind: KindMapping, columns: dict[str, dict[str, Any]], at: str, types: dict[str, str]
) -> list[str]:
    """Problems of a soft delete's columns (``onDeleted.set``); their types go into ``types``."""
    if not isinstance(kind.on_deleted, SoftDelete):
        return []
    problems = []
    for name in kind.on_deleted.set:
        where = f"{at}.onDeleted.set.{name}"
        found = columns.get(name)
        if found is None:
            problems.append(
                f"{where}: {kind.table} has no column {name}; add it with the application's "
                f"own migrations, or set another; known: {sorted(columns)}"
            )
        elif found["generated"]:
            problems.append(f"{where}: {kind.table}.{name} is a generated column: set another")
        else:
            types.setdefault(name, found["type"])
    return problems


def _unmapped(where: str, kind: str) -> str:
    return f"{where}: {kind} has no mapping (its records would land as jsonb): map it"


def _id_problems(kind: KindMapping, columns: dict[str, dict[str, Any]], at: str) -> list[str]:
    found = columns.get(kind.id)
    if found is None:
        return [f"{at}.id: {kind.table} has no column {kind.id}; name its primary key"]
    problems = []
    if found["base_type"] not in INTEGER_IDS:
        problems.append(
            f"{at}.id: {kind.table}.{kind.id} is {found['type']}, and the ledger holds integer "
            "destination ids (bigint): name an integer key"
        )
    elif found["sequence"] is None:
        problems.append(
            f"{at}.id: {kind.table}.{kind.id} is not filled by a sequence: make it serial, "
            "bigserial or an identity column"
        )
    return problems


def _natural_key_problems(conn: Connection, kind: KindMapping, at: str) -> list[str]:
    if kind.natural_key is None:
        return []
    wanted = sorted(kind.natural_key.columns)
    rows = conn.execute(_query("unique_keys"), {"table": quoted(kind.table)}).fetchall()
    if any(sorted(row["columns"]) == wanted for row in rows):
        return []
    listed = ", ".join(kind.natural_key.columns)
    return [
        f"{at}.naturalKey.columns: {kind.table} has no unique index on exactly ({listed}): "
        f"create one (CREATE UNIQUE INDEX ON {kind.table} ({listed})) or change the key"
    ]


def _join_problems(conn: Connection, mapping: Mapping, table: str, join: Any, at: str) -> list[str]:
    columns = _columns(conn, table)
    if not columns:
        return [f"{at}.table: there is no table {table} in this database; create it"]
    problems = [
        f"{at}.{field}: {table} has no column {name}; known: {sorted(columns)}"
        for field, name in (("column", join.column), ("otherColumn", join.other_column))
        if name not in columns
    ]
    if join.kind not in mapping.kinds:
        problems.append(_unmapped(f"{at}.kind", join.kind))
    return problems


def _plans(
    conn: Connection,
    kind: KindMapping,
    found: KindCatalog,
    versions: generate.Versions = generate.FULL,
) -> str | None:
    """PostgreSQL's reason for refusing to plan the kind's rows statement (a full run's, or
    with ``versions`` a delta's); None if it plans."""
    try:
        statement = generate.statement(kind, found, "rows", versions)
    except MappingInvalid as exc:
        return str(exc)
    params = {"rows": Jsonb([]), "workspace": "", "kind": "", "run_id": 0, "deleted": []}
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(b"EXPLAIN " + statement, params)
    except psycopg.errors.InsufficientPrivilege:
        return None  # the admitting role (the operator's own) may not write here; the workers' may
    except psycopg.Error as exc:
        return (exc.diag.message_primary or str(exc)).strip()
    return None
