"""Writers generated from a mapping: ONE statement per window, composed with ``psycopg.sql``.

The statement reads the window's records with ``jsonb_to_recordset`` (each field declared with
the type its column takes, so PostgreSQL parses it once), resolves references through the ledger
(one index probe per row), takes each new row's id from the table's sequence up front (so the
ledger slot needs no column of the application's table to find its record again), inserts the
rows, claims their ledger slots, writes join tables and, with a natural key, matches the rows
the application already has. Identifiers are quoted by ``psycopg.sql``; the window's values are
parameters; what the mapping itself fixes (a kind's name, a fixed value, a JSON path) is a
literal quoted by ``psycopg.sql``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Literal

from psycopg import sql

from ferryman_worker.destinations.mapping import (
    Column,
    Constant,
    KindMapping,
    OnExisting,
    Unresolved,
)

Tail = Literal["window", "rows"]

_CONSTANTS = {
    Constant.WORKSPACE: sql.SQL("%(workspace)s::text"),
    Constant.RUN: sql.SQL("%(run_id)s::bigint"),
    Constant.KIND: sql.SQL("%(kind)s::text"),
}
_TAILS = {
    "window": sql.SQL(
        "SELECT ferryman_close_window(%(task_id)s, %(job_id)s, %(run_id)s, %(kind)s, "
        "%(offset)s, (SELECT count(*) FROM slots)::integer, 0, %(errors)s) AS failed"
    ),
    "rows": sql.SQL("SELECT count(*)::integer AS written FROM slots"),
}


KEEPS_SOURCE_ID = ("bigint", "integer", "text")
"""Column types whose text is the source id's own (an integer id, or a text one)."""


@dataclasses.dataclass(frozen=True)
class KindCatalog:
    """What the catalog says about a kind's table, resolved at admission and kept in the run."""

    types: dict[str, str]
    """Column -> the type its value is read as (the mapping's cast, or the column's type)."""

    sequence: str
    """The sequence filling the id column (``pg_get_serial_sequence``)."""

    always: bool = False
    """The id is an identity column GENERATED ALWAYS (inserted with OVERRIDING SYSTEM VALUE)."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KindCatalog:
        return cls(dict(data["types"]), str(data["sequence"]), bool(data.get("always", False)))


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


@dataclasses.dataclass
class _Fields:
    """The record's top-level keys read by the statement, each declared once with a type."""

    declared: dict[str, str] = dataclasses.field(default_factory=dict)

    def use(self, pointer: str, type_: str) -> None:
        tokens = _tokens(pointer)
        key = tokens[0]
        wanted = type_ if len(tokens) == 1 else "jsonb"
        self.declared.setdefault(key, wanted)

    def read(self, pointer: str, type_: str, alias: str = "r") -> sql.Composable:
        """The value at ``pointer`` as ``type_``."""
        tokens = _tokens(pointer)
        column = sql.Identifier(alias, tokens[0])
        declared = self.declared[tokens[0]]
        if len(tokens) == 1 and declared == type_:
            return column
        if declared != "jsonb":
            return sql.SQL("{}::{}").format(column, sql.SQL(type_))
        path = sql.SQL("{}::text[]").format(sql.Literal(tokens[1:]))
        if type_ == "jsonb":
            return sql.SQL("({} #> {})").format(column, path)
        return sql.SQL("({} #>> {})::{}").format(column, path, sql.SQL(type_))

    def definition(self) -> sql.Composable:
        return sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(key), sql.SQL(type_))
            for key, type_ in self.declared.items()
        )


def _table(name: str) -> sql.Identifier:
    return sql.Identifier(*name.split("."))


def _ledger_probe(alias: str, kind: str, source_id: sql.Composable) -> sql.Composable:
    return sql.SQL(
        "LEFT JOIN LATERAL (SELECT l.row_id FROM ferryman_ledger l"
        " WHERE l.workspace = %(workspace)s AND l.kind = {kind} AND l.source_id = {source}"
        " LIMIT 1) {alias} ON true"
    ).format(kind=sql.Literal(kind), source=source_id, alias=sql.Identifier(alias))


@dataclasses.dataclass(frozen=True)
class _Shape:
    """The parts of one kind's statement."""

    mapping: KindMapping
    catalog: KindCatalog

    def fields(self) -> _Fields:
        fields = _Fields()
        for name, column in self.mapping.columns.items():  # typed uses first: they declare
            if column.field is not None:
                fields.use(column.field, self.catalog.types[name])
        fields.use(self.mapping.source_id, "text")
        for column in self.mapping.columns.values():
            if column.reference is not None:
                fields.use(column.reference.field, "text")
        for join in self.mapping.joins:
            fields.use(join.field, "jsonb")
        return fields

    def prepared(self, fields: _Fields) -> tuple[list[sql.Composable], list[sql.Composable]]:
        """The prepared row's select list (source id, columns, join arrays) and its joins."""
        source = fields.read(self.mapping.source_id, "text")
        select: list[sql.Composable] = [sql.SQL("{} AS ferryman_source_id").format(source)]
        lateral: list[sql.Composable] = []
        for index, (name, column) in enumerate(self.mapping.columns.items()):
            type_ = self.catalog.types[name]
            value = self._value(fields, column, type_, f"ref_{index}", lateral)
            select.append(sql.SQL("{} AS {}").format(value, sql.Identifier(f"c_{index}")))
        for index, join in enumerate(self.mapping.joins):
            array = fields.read(join.field, "jsonb")
            select.append(sql.SQL("{} AS {}").format(array, sql.Identifier(f"j_{index}")))
        return select, lateral

    def _value(
        self,
        fields: _Fields,
        column: Column,
        type_: str,
        alias: str,
        lateral: list[sql.Composable],
    ) -> sql.Composable:
        if column.field is not None:
            value = fields.read(column.field, type_)
            if column.default is None:
                return value
            return sql.SQL("COALESCE({}, {}::{})").format(
                value, sql.Literal(column.default), sql.SQL(type_)
            )
        if column.constant is not None:
            return _CONSTANTS[column.constant]
        if column.value is not None:
            return sql.SQL("{}::{}").format(sql.Literal(column.value), sql.SQL(type_))
        reference = column.reference
        assert reference is not None
        source = fields.read(reference.field, "text")
        lateral.append(_ledger_probe(alias, reference.kind, source))
        found = sql.SQL("{}.row_id").format(sql.Identifier(alias))
        if reference.unresolved is not Unresolved.REFUSE:
            return found
        return sql.SQL(
            "CASE WHEN {source} IS NOT NULL AND {found} IS NULL"
            " THEN ferryman_unresolved({kind}, {source}) ELSE {found} END"
        ).format(source=source, found=found, kind=sql.Literal(reference.kind))

    def source_column(self) -> str | None:
        """A column that stores the record's source id as it is (an integer or text column
        filled from the source id's field, with no cast or default), so the rows' RETURNING
        finds each record's source id again (a BEFORE trigger must leave it as it is); None
        if there is none."""
        for name, column in self.mapping.columns.items():
            if (
                column.field == self.mapping.source_id
                and column.cast is None
                and column.default is None
                and self.catalog.types[name] in KEEPS_SOURCE_ID
            ):
                return name
        return None

    def returning(self) -> str | None:
        """The column whose RETURNING gives the slots (see ``source_column``), when every
        record is a new row (no natural key to skip or update on)."""
        key = self.mapping.natural_key
        if key is not None and key.on_existing is not OnExisting.FAIL:
            return None
        return self.source_column()

    def key_match(self, row: str, target: str) -> sql.Composable:
        """``target``'s natural key equals ``row``'s."""
        assert self.mapping.natural_key is not None
        names = list(self.mapping.columns)
        return sql.SQL(" AND ").join(
            sql.SQL("{} = {}").format(
                sql.Identifier(target, column),
                sql.Identifier(row, f"c_{names.index(column)}"),
            )
            for column in self.mapping.natural_key.columns
        )


def statement(mapping: KindMapping, catalog: KindCatalog, tail: Tail) -> bytes:
    """The kind's window statement (``tail="window"``: rows, slots, then the window's close) or
    its rows statement (``"rows"``: returns how many rows it wrote)."""
    shape = _Shape(mapping, catalog)
    fields = shape.fields()
    select, lateral = shape.prepared(fields)
    ctes = [
        sql.SQL("input AS (SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb) AS r({}))").format(
            fields.definition()
        ),
        *_rows(shape, select, lateral),
        sql.SQL(
            "claimed AS (INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)"
            " SELECT %(workspace)s, %(kind)s, s.ferryman_source_id, s.ferryman_row_id,"
            " %(run_id)s FROM slots s)"
        ),
        *_members(shape, fields),
    ]
    composed = sql.SQL("WITH {} {}").format(sql.SQL(",\n").join(ctes), _TAILS[tail])
    return composed.as_bytes(None)


def _rows(
    shape: _Shape, select: list[sql.Composable], lateral: list[sql.Composable]
) -> Iterator[sql.Composable]:
    """The CTEs writing the rows; the last one, ``slots``, holds each record's (source id,
    destination id) and join arrays."""
    mapping, catalog = shape.mapping, shape.catalog
    table = _table(mapping.table)
    width = len(mapping.columns)
    carried = [sql.Identifier(f"c_{i}") for i in range(width)]
    arrays = [sql.Identifier(f"j_{i}") for i in range(len(mapping.joins))]

    def insert(fresh: str) -> sql.Composable:
        return sql.SQL(
            "written AS (INSERT INTO {table} ({id}, {columns}){overriding}"
            " SELECT f.ferryman_row_id, {values} FROM {fresh} f)"
        ).format(
            table=table,
            id=sql.Identifier(mapping.id),
            columns=sql.SQL(", ").join(sql.Identifier(c) for c in mapping.columns),
            overriding=sql.SQL(" OVERRIDING SYSTEM VALUE" if catalog.always else ""),
            values=sql.SQL(", ").join(sql.SQL("f.{}").format(c) for c in carried),
            fresh=sql.Identifier(fresh),
        )

    sequence = sql.SQL("nextval({}::regclass) AS ferryman_row_id").format(
        sql.Literal(catalog.sequence)
    )
    source = sql.SQL("FROM input r {}").format(sql.SQL(" ").join(lateral))
    policy = mapping.natural_key.on_existing if mapping.natural_key else OnExisting.FAIL
    keeper = shape.returning()
    if keeper is not None:  # the table keeps the source id: RETURNING gives the slots
        yield sql.SQL(
            "slots AS (INSERT INTO {table} ({columns}) SELECT {values} {source}"
            " RETURNING {id} AS ferryman_row_id, {keeper}::text AS ferryman_source_id)"
        ).format(
            table=table,
            columns=sql.SQL(", ").join(sql.Identifier(c) for c in mapping.columns),
            values=sql.SQL(", ").join(select[1 : width + 1]),
            source=source,
            id=sql.Identifier(mapping.id),
            keeper=sql.Identifier(keeper),
        )
        return
    if policy is OnExisting.FAIL:  # a match is refused by the unique index: the database's reason
        yield sql.SQL("slots AS (SELECT {}, {} {})").format(
            sequence, sql.SQL(", ").join(select), source
        )
        yield insert("slots")
        return
    yield sql.SQL("prepared AS (SELECT {} {})").format(sql.SQL(", ").join(select), source)
    yield sql.SQL(
        "matched AS (SELECT t.{id} AS ferryman_row_id, p.* FROM prepared p"
        " JOIN {table} t ON {match})"
    ).format(id=sql.Identifier(mapping.id), table=table, match=shape.key_match("p", "t"))
    yield sql.SQL(
        "fresh AS (SELECT {sequence}, p.* FROM prepared p"
        " WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE {match}))"
    ).format(sequence=sequence, table=table, match=shape.key_match("p", "t"))
    yield insert("fresh")
    assert mapping.natural_key is not None
    kept = set(mapping.natural_key.columns)
    changed = [
        sql.SQL("{} = m.{}").format(sql.Identifier(name), carried[i])
        for i, name in enumerate(mapping.columns)
        if name not in kept
    ]
    if policy is OnExisting.UPDATE and changed:
        yield sql.SQL(
            "updated AS (UPDATE {table} t SET {changed} FROM matched m"
            " WHERE t.{id} = m.ferryman_row_id)"
        ).format(table=table, changed=sql.SQL(", ").join(changed), id=sql.Identifier(mapping.id))
    slot_columns = sql.SQL(", ").join(
        [sql.SQL("ferryman_source_id"), sql.SQL("ferryman_row_id"), *arrays]
    )
    yield sql.SQL(
        "slots AS (SELECT {cols} FROM fresh UNION ALL SELECT {cols} FROM matched)"
    ).format(cols=slot_columns)


def _members(shape: _Shape, fields: _Fields) -> Iterator[sql.Composable]:
    """One CTE per join table: the pairs whose other record is in the ledger. The arrays are
    the slots' own, or, when the rows' RETURNING made the slots, read again from the input."""
    returned = shape.returning() is not None
    source = fields.read(shape.mapping.source_id, "text", "i")
    for index, join in enumerate(shape.mapping.joins):
        conflict = " ON CONFLICT DO NOTHING" if shape.mapping.natural_key else ""
        rows: sql.Composable
        if returned:
            rows = sql.SQL("slots s JOIN input i ON {} = s.ferryman_source_id").format(source)
            array = fields.read(join.field, "jsonb", "i")
        else:
            rows = sql.SQL("slots s")
            array = sql.SQL("s.{}").format(sql.Identifier(f"j_{index}"))
        yield sql.SQL(
            "{name} AS (INSERT INTO {table} ({column}, {other})"
            " SELECT DISTINCT s.ferryman_row_id, o.row_id FROM {rows}"
            " CROSS JOIN LATERAL jsonb_array_elements_text({array}) AS e(source_id)"
            " JOIN LATERAL (SELECT l.row_id FROM ferryman_ledger l"
            " WHERE l.workspace = %(workspace)s AND l.kind = {kind} AND l.source_id = e.source_id"
            " LIMIT 1) o ON true{conflict})"
        ).format(
            name=sql.Identifier(f"members_{index}"),
            table=_table(join.table),
            column=sql.Identifier(join.column),
            other=sql.Identifier(join.other_column),
            rows=rows,
            array=array,
            kind=sql.Literal(join.kind),
            conflict=sql.SQL(conflict),
        )


def landing_statement(source_id: str, tail: Tail) -> bytes:
    """The writer of a kind without a mapping: each record as jsonb in ``ferryman_landing``."""
    path = sql.SQL("{}::text[]").format(sql.Literal(_tokens(source_id)))
    composed = sql.SQL(
        "WITH slots AS (INSERT INTO ferryman_landing (workspace, kind, source_id, record, run_id)"
        " SELECT %(workspace)s, %(kind)s, r.rec #>> {path}, r.rec, %(run_id)s"
        " FROM jsonb_array_elements(%(rows)s::jsonb) AS r(rec)"
        " RETURNING id AS ferryman_row_id, source_id AS ferryman_source_id),\n"
        "claimed AS (INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)"
        " SELECT %(workspace)s, %(kind)s, s.ferryman_source_id, s.ferryman_row_id, %(run_id)s"
        " FROM slots s) {tail}"
    ).format(path=path, tail=_TAILS[tail])
    return composed.as_bytes(None)
