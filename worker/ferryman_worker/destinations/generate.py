"""Writers generated from a mapping: ONE statement per window, composed with ``psycopg.sql``.

The statement reads the window's records with ``jsonb_to_recordset`` (each field declared with
the type its column takes, so PostgreSQL parses it once), resolves references through the ledger
(one index probe per row), takes each new row's id from the table's sequence up front (so the
ledger slot, which keeps its record's version, needs neither a column of the application's table
nor a second look at the records to find its record again), inserts the rows, claims their ledger
slots, writes join tables and, with a natural key, matches the rows the application already has.
Identifiers are quoted by ``psycopg.sql``; the window's values are parameters; what the mapping
itself fixes (a kind's name, a fixed value, a JSON path) is a literal quoted by ``psycopg.sql``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Annotated, Literal

from psycopg import sql
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ferryman_worker.destinations.columns import COLUMN_TYPE, column_type
from ferryman_worker.destinations.document import Identifier, TableName
from ferryman_worker.destinations.mapping import KindMapping, OnDeleted, OnExisting, SoftDelete
from ferryman_worker.errors import MappingInvalid

ColumnType = Annotated[str, Field(min_length=1, max_length=100, pattern=COLUMN_TYPE)]

Tail = Literal["window", "rows"]
_COUNT_SLOTS = sql.SQL("(SELECT count(*) FROM slots)")
_MATCHED = sql.SQL("(SELECT count(*) FROM matched)")
"""The window's records matched by the kind's natural key to rows the application had: their
ledger slots name those rows, nothing is inserted for them (counted as matched, not written)."""
_GONE = sql.SQL(
    "gone AS (UPDATE ferryman_ledger SET source_deleted_at = now()"
    " WHERE workspace = %(workspace)s AND kind = %(kind)s"
    " AND source_id = ANY(%(deleted)s::text[]) AND source_deleted_at IS NULL)"
)
"""A delta's tombstones (``deleted``: source ids the listing marks deleted), recorded."""
_GONE_ROWS = sql.SQL(
    "gone AS (UPDATE ferryman_ledger SET source_deleted_at = now()"
    " WHERE workspace = %(workspace)s AND kind = %(kind)s"
    " AND source_id = ANY(%(deleted)s::text[]) AND source_deleted_at IS NULL RETURNING row_id)"
)
"""The same, returning the rows the ledger names (for onDeleted: delete or set)."""
_REVERSIONED = sql.SQL(
    "reversioned AS (UPDATE ferryman_ledger l SET source_version = v.ferryman_version,"
    " version_run_id = %(run_id)s FROM revised v WHERE l.workspace = %(workspace)s"
    " AND l.kind = %(kind)s AND l.source_id = v.ferryman_source_id)"
)
"""A delta's changed records (``revised``): the ledger's versions moved on, by this run."""


_NONE = sql.SQL("0")


def _tail(
    tail: Tail,
    written: sql.Composable,
    skipped: sql.Composable,
    matched: sql.Composable = _NONE,
) -> sql.Composable:
    """The statement's last part: the window's close with its counts (the row errors recorded
    now, the rows written and matched), or the rows written and matched. ``skipped`` adds to
    the records the caller skipped already (``%(skipped)s``: a tree's children in the
    ledger, not fetched again)."""
    if tail == "rows":
        return sql.SQL("SELECT ({})::integer AS written, ({})::integer AS matched").format(
            written, matched
        )
    return sql.SQL(
        "SELECT ferryman_close_window(%(task_id)s, %(job_id)s, %(run_id)s, %(kind)s, "
        "%(offset)s, ({written})::integer, ({skipped})::integer + %(skipped)s::integer,"
        " %(errors)s, ({matched})::integer, p_commit => %(commit)s::text) AS failed,"
        " ({written})::integer AS written,"
        " ({matched})::integer AS matched"
    ).format(written=written, skipped=skipped, matched=matched)


class KindCatalog(BaseModel):
    """What the catalog says about a kind's table, resolved at admission and kept in the run.

    A worker reads it back from the run's row: it is validated again then (``from_json``), so
    that what reaches a statement is a table name, identifiers and types of the catalog's own
    spelling, never SQL."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    types: dict[Identifier, ColumnType]
    """Column -> the type its value is read as (the mapping's cast, or the column's type)."""

    sequence: Annotated[str, Field(min_length=1, max_length=200)]
    """The sequence filling the id column (``pg_get_serial_sequence``); a literal in SQL."""

    always: bool = False
    """The id is an identity column GENERATED ALWAYS (inserted with OVERRIDING SYSTEM VALUE)."""

    table: TableName | None = None
    """The table as the catalog resolved it (``schema.table``); None in a snapshot kept before
    tables were resolved (the mapping's name is read in the installation's first schema)."""

    joins: tuple[TableName, ...] = ()
    """The join tables, resolved like ``table``, in the mapping's order."""

    @classmethod
    def from_json(cls, data: object) -> KindCatalog:
        """A stored catalog, validated; MappingInvalid names what does not fit."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                for e in exc.errors(include_input=False, include_url=False)
            )
        raise MappingInvalid(
            f"the run's stored catalog is not valid ({problems}): ferryman admitted no such "
            "snapshot; cancel the run and admit it again"
        )


@dataclasses.dataclass(frozen=True)
class Versions:
    """How a kind's writer reads each record's source version, and whether it writes a delta.

    The version is text the ledger keeps (``source_version``, compared by
    ``ferryman_version_newer``): 't:' and the UTC time of a datetime field, 'n:' and the
    zero-padded value of an integer field, or 'h:' and a 64-bit hash of the record (no field:
    ``HASHED``); NULL when the field is missing. A full run's statement inserts every record
    and claims its slot with its version; a delta's inserts the records the ledger does not
    hold, updates (through the ledger's row id) those whose version is newer than the ledger's,
    and skips the rest."""

    field: str | None = None
    """JSON pointer to the version field; None: a hash of the record."""

    type: Literal["datetime", "integer"] = "datetime"
    delta: bool = False


FULL = Versions()

HASHED = sql.SQL("('h:' || jsonb_hash_extended(e.rec, 0))")
"""The version of a record without a version field: PostgreSQL's 64-bit hash of the jsonb
record, read as it is (an md5 would print it to text first). A hash only says "different": were
it ever to change (another PostgreSQL, another architecture), the next delta would apply each
such record once more, and never skip a change."""


def _version(value: sql.Composable, versions: Versions) -> sql.Composable:
    """The tagged version text of ``value`` (the version field read as timestamptz or
    bigint)."""
    if versions.type == "integer":
        return sql.SQL("('n:' || lpad(({})::text, 20, '0'))").format(value)
    return sql.SQL(
        "('t:' || to_char(({}) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US'))"
    ).format(value)


def _version_type(versions: Versions) -> str:
    return "bigint" if versions.type == "integer" else "timestamptz"


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
            return sql.SQL("{}::{}").format(column, column_type(type_))
        path = sql.SQL("{}::text[]").format(sql.Literal(tokens[1:]))
        if type_ == "jsonb":
            return sql.SQL("({} #> {})").format(column, path)
        return sql.SQL("({} #>> {})::{}").format(column, path, column_type(type_))

    def definition(self) -> sql.Composable:
        return sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(key), column_type(type_))
            for key, type_ in self.declared.items()
        )


def _table(name: str) -> sql.Identifier:
    return sql.Identifier(*name.split("."))


@dataclasses.dataclass(frozen=True)
class _Shape:
    """The parts of one kind's statement."""

    mapping: KindMapping
    catalog: KindCatalog

    @property
    def table(self) -> sql.Identifier:
        """The kind's table, as the catalog resolved it at admission."""
        return _table(self.catalog.table or self.mapping.table)

    def join_table(self, index: int) -> sql.Identifier:
        joins = self.catalog.joins
        return _table(joins[index] if index < len(joins) else self.mapping.joins[index].table)

    def scoped(self, alias: str) -> sql.Composable:
        """`` AND alias.<workspace column> = the run's workspace`` (nothing for a table without
        one): every statement touching the application's rows is held to the run's workspace."""
        column = self.mapping.workspace_column
        if column is None:
            return sql.SQL("")
        return sql.SQL(" AND {} = %(workspace)s::text").format(sql.Identifier(alias, column))

    def fields(self, versions: Versions = FULL) -> _Fields:
        fields = _Fields()
        reads = [(name, read) for name, c in self.mapping.columns.items() for read in c.reads()]
        for name, read in reads:  # reads as the column's own type first: they declare
            if read.type is None:
                fields.use(read.pointer, self.catalog.types[name])
        if versions.field is not None:
            fields.use(versions.field, _version_type(versions))
        fields.use(self.mapping.source_id, "text")
        for _, read in reads:
            if read.type is not None:
                fields.use(read.pointer, read.type)
        for join in self.mapping.joins:
            fields.use(join.field, "jsonb")
        return fields

    def prepared(self, fields: _Fields) -> tuple[list[sql.Composable], list[sql.Composable]]:
        """The prepared row's select list (source id, columns, join arrays) and its joins."""
        source = fields.read(self.mapping.source_id, "text")
        select: list[sql.Composable] = [sql.SQL("{} AS ferryman_source_id").format(source)]
        lateral: list[sql.Composable] = []
        for index, (name, column) in enumerate(self.mapping.columns.items()):
            lateral.extend(column.joins(fields, f"ref_{index}"))
            value = column.expression(fields, self.catalog.types[name], f"ref_{index}")
            select.append(sql.SQL("{} AS {}").format(value, sql.Identifier(f"c_{index}")))
        for index, join in enumerate(self.mapping.joins):
            array = fields.read(join.field, "jsonb")
            select.append(sql.SQL("{} AS {}").format(array, sql.Identifier(f"j_{index}")))
        return select, lateral

    def matches(self) -> bool:
        """Whether the statement matches records to the application's rows (a natural key
        whose onExisting is skip or update; with fail, the unique index refuses a match)."""
        key = self.mapping.natural_key
        return key is not None and key.on_existing is not OnExisting.FAIL

    def updates(self) -> bool:
        """Whether a delta updates the rows of changed records (not when a natural key says
        onExisting: skip: the application's rows are its own)."""
        key = self.mapping.natural_key
        return key is None or key.on_existing is not OnExisting.SKIP

    def key_match(self, row: str, target: str) -> sql.Composable:
        """``target``'s natural key equals ``row``'s."""
        assert self.mapping.natural_key is not None
        names = list(self.mapping.columns)
        match = sql.SQL(" AND ").join(
            sql.SQL("{} = {}").format(
                sql.Identifier(target, column),
                sql.Identifier(row, f"c_{names.index(column)}"),
            )
            for column in self.mapping.natural_key.columns
        )
        return sql.SQL("{}{}").format(match, self.scoped(target))


def statement(
    mapping: KindMapping, catalog: KindCatalog, tail: Tail, versions: Versions = FULL
) -> bytes:
    """The kind's window statement (``tail="window"``: rows, slots, then the window's close) or
    its rows statement (``"rows"``: returns how many rows it wrote); with ``versions.delta``,
    a delta run's (see ``Versions``)."""
    shape = _Shape(mapping, catalog)
    fields = shape.fields(versions)
    select, lateral = shape.prepared(fields)
    select.append(sql.SQL("r.ferryman_version"))
    source = fields.read(mapping.source_id, "text")
    ctes = [
        *_input(fields, versions, source),
        *_rows(shape, select, lateral),
        _claimed(),
        *_members(shape),
    ]
    matched = _MATCHED if shape.matches() else _NONE
    written: sql.Composable = sql.SQL("{} - {}").format(_COUNT_SLOTS, matched)
    skipped: sql.Composable = _NONE
    if versions.delta:
        ctes += [*_revisions(shape, select, lateral), *_deletions(shape)]
        updates = sql.SQL("(SELECT count(*) FROM revised)") if shape.updates() else _NONE
        written = sql.SQL("{} - {} + {}").format(_COUNT_SLOTS, matched, updates)
        skipped = sql.SQL(
            "(SELECT count(*) FROM known) - (SELECT count(*) FROM input) - {}"
        ).format(updates)
    composed = sql.SQL("WITH {} {}").format(
        sql.SQL(",\n").join(ctes), _tail(tail, written, skipped, matched)
    )
    return composed.as_bytes(None)


def _input(fields: _Fields, versions: Versions, source: sql.Composable) -> list[sql.Composable]:
    """The window's records with their versions (``input``); for a delta, ``known`` (each
    with the ledger's row id and version), ``input`` (those the ledger does not hold) and
    ``changed`` (those whose version is newer than the ledger's)."""
    if versions.field is not None:
        version = _version(fields.read(versions.field, _version_type(versions)), versions)
        rows = sql.SQL("jsonb_to_recordset(%(rows)s::jsonb) AS r({})").format(fields.definition())
    else:
        version = HASHED
        rows = sql.SQL(
            "jsonb_array_elements(%(rows)s::jsonb) AS e(rec)"
            " CROSS JOIN LATERAL jsonb_to_record(e.rec) AS r({})"
        ).format(fields.definition())
    arrived = sql.SQL("SELECT r.*, {} AS ferryman_version FROM {}").format(version, rows)
    if not versions.delta:
        return [sql.SQL("input AS ({})").format(arrived)]
    return [
        sql.SQL("arrived AS ({})").format(arrived),
        _known("r", source),
        sql.SQL("input AS (SELECT * FROM known WHERE ferryman_known_id IS NULL)"),
        sql.SQL(
            "changed AS (SELECT * FROM known WHERE ferryman_known_id IS NOT NULL"
            " AND ferryman_version_newer(ferryman_version, ferryman_known_version))"
        ),
    ]


def _known(alias: str, source: sql.Composable) -> sql.Composable:
    """A delta's window records (``arrived``, as ``alias``) each with the ledger's row id and
    version (NULL: not imported), one probe of the ledger's key per record: a join would let
    the planner read the kind's whole range of the ledger for every window while its statistics
    are older than its rows (a delta's cost would grow with the kind)."""
    return sql.SQL(
        "known AS (SELECT {alias}.*, l.row_id AS ferryman_known_id,"
        " l.source_version AS ferryman_known_version FROM arrived {alias}"
        " LEFT JOIN LATERAL (SELECT l.row_id, l.source_version FROM ferryman_ledger l"
        " WHERE l.workspace = %(workspace)s AND l.kind = %(kind)s AND l.source_id = {source}"
        " LIMIT 1) l ON true)"
    ).format(alias=sql.Identifier(alias), source=source)


def _claimed() -> sql.Composable:
    """The ledger slots of the rows written (or matched), each with its record's version."""
    return sql.SQL(
        "claimed AS (INSERT INTO ferryman_ledger"
        " (workspace, kind, source_id, row_id, run_id, source_version)"
        " SELECT %(workspace)s, %(kind)s, s.ferryman_source_id, s.ferryman_row_id,"
        " %(run_id)s, s.ferryman_version FROM slots s)"
    )


def _revisions(
    shape: _Shape, select: list[sql.Composable], lateral: list[sql.Composable]
) -> Iterator[sql.Composable]:
    """A delta's changed records: ``revised`` (each with the ledger's row id), the rows
    updated through it (every mapped column; not for a natural key whose onExisting is skip:
    the application's row is left as it is), their join pairs made to match, and the
    ledger's versions moved on."""
    mapping = shape.mapping
    yield sql.SQL(
        "revised AS (SELECT r.ferryman_known_id AS ferryman_row_id, {} FROM changed r {})"
    ).format(sql.SQL(", ").join(select), sql.SQL(" ").join(lateral))
    yield _REVERSIONED
    if not shape.updates():
        return
    yield sql.SQL(
        "revised_rows AS (UPDATE {table} t SET {changed} FROM revised v"
        " WHERE t.{id} = v.ferryman_row_id{scoped})"
    ).format(
        table=shape.table,
        scoped=shape.scoped("t"),
        changed=sql.SQL(", ").join(
            sql.SQL("{} = v.{}").format(sql.Identifier(name), sql.Identifier(f"c_{i}"))
            for i, name in enumerate(mapping.columns)
        ),
        id=sql.Identifier(mapping.id),
    )
    for index, join in enumerate(mapping.joins):
        array = sql.SQL("v.{}").format(sql.Identifier(f"j_{index}"))
        others = sql.SQL(
            "jsonb_array_elements_text({array}) AS e(source_id) JOIN ferryman_ledger o"
            " ON o.workspace = %(workspace)s AND o.kind = {kind} AND o.source_id = e.source_id"
        ).format(array=array, kind=sql.Literal(join.kind))
        names = {
            "table": shape.join_table(index),
            "column": sql.Identifier(join.column),
            "other": sql.Identifier(join.other_column),
            "others": others,
        }
        yield sql.SQL(
            "{name} AS (INSERT INTO {table} ({column}, {other})"
            " SELECT DISTINCT v.ferryman_row_id, o.row_id FROM revised v"
            " CROSS JOIN LATERAL (SELECT o.row_id FROM {others}) o ON CONFLICT DO NOTHING)"
        ).format(name=sql.Identifier(f"relinked_{index}"), **names)
        yield sql.SQL(
            "{name} AS (DELETE FROM {table} j USING revised v WHERE j.{column} = v.ferryman_row_id"
            " AND j.{other} NOT IN (SELECT o.row_id FROM {others}))"
        ).format(name=sql.Identifier(f"unlinked_{index}"), **names)


def _deletions(shape: _Shape) -> Iterator[sql.Composable]:
    """A delta's tombstones recorded in the ledger (each once: a retried window finds them
    recorded) and, by the mapping's ``onDeleted``, their rows deleted or marked deleted."""
    action = shape.mapping.on_deleted
    if action is OnDeleted.RECORD:
        yield _GONE
        return
    yield _GONE_ROWS
    names = {
        "table": shape.table,
        "id": sql.Identifier(shape.mapping.id),
        "scoped": shape.scoped("t"),
    }
    if action is OnDeleted.DELETE:
        yield sql.SQL(
            "removed AS (DELETE FROM {table} t USING gone g WHERE t.{id} = g.row_id{scoped})"
        ).format(**names)
        return
    assert isinstance(action, SoftDelete)
    marks = []
    for column, stored in action.set.items():
        value: sql.Composable
        if stored.constant is not None:
            value = stored.constant.as_sql()
        else:
            type_ = column_type(shape.catalog.types[column])
            value = sql.SQL("{}::{}").format(sql.Literal(stored.value), type_)
        marks.append(sql.SQL("{} = {}").format(sql.Identifier(column), value))
    yield sql.SQL(
        "removed AS (UPDATE {table} t SET {marks} FROM gone g WHERE t.{id} = g.row_id{scoped})"
    ).format(marks=sql.SQL(", ").join(marks), **names)


def _rows(
    shape: _Shape, select: list[sql.Composable], lateral: list[sql.Composable]
) -> Iterator[sql.Composable]:
    """The CTEs writing the rows; the last one, ``slots``, holds each record's (source id,
    destination id) and join arrays."""
    mapping, catalog = shape.mapping, shape.catalog
    table = shape.table
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
            " WHERE t.{id} = m.ferryman_row_id{scoped})"
        ).format(
            table=table,
            changed=sql.SQL(", ").join(changed),
            id=sql.Identifier(mapping.id),
            scoped=shape.scoped("t"),
        )
    slot_columns = sql.SQL(", ").join(
        [
            sql.SQL("ferryman_source_id"),
            sql.SQL("ferryman_row_id"),
            *arrays,
            sql.SQL("ferryman_version"),
        ]
    )
    yield sql.SQL(
        "slots AS (SELECT {cols} FROM fresh UNION ALL SELECT {cols} FROM matched)"
    ).format(cols=slot_columns)


def _members(shape: _Shape) -> Iterator[sql.Composable]:
    """One CTE per join table: the pairs whose other record is in the ledger."""
    for index, join in enumerate(shape.mapping.joins):
        conflict = " ON CONFLICT DO NOTHING" if shape.mapping.natural_key else ""
        yield sql.SQL(
            "{name} AS (INSERT INTO {table} ({column}, {other})"
            " SELECT DISTINCT s.ferryman_row_id, o.row_id FROM slots s"
            " CROSS JOIN LATERAL jsonb_array_elements_text(s.{array}) AS e(source_id)"
            " JOIN LATERAL (SELECT l.row_id FROM ferryman_ledger l"
            " WHERE l.workspace = %(workspace)s AND l.kind = {kind} AND l.source_id = e.source_id"
            " LIMIT 1) o ON true{conflict})"
        ).format(
            name=sql.Identifier(f"members_{index}"),
            table=shape.join_table(index),
            column=sql.Identifier(join.column),
            other=sql.Identifier(join.other_column),
            array=sql.Identifier(f"j_{index}"),
            kind=sql.Literal(join.kind),
            conflict=sql.SQL(conflict),
        )


def landing_statement(source_id: str, tail: Tail, versions: Versions = FULL) -> bytes:
    """The writer of a kind without a mapping: each record as jsonb in ``ferryman_landing``;
    with ``versions.delta``, a changed record's landed row is replaced."""
    path = sql.SQL("{}::text[]").format(sql.Literal(_tokens(source_id)))
    if versions.field is not None:
        field = sql.SQL("{}::text[]").format(sql.Literal(_tokens(versions.field)))
        typed = sql.SQL("(e.rec #>> {})::{}").format(field, column_type(_version_type(versions)))
        version = _version(typed, versions)
    else:
        version = HASHED
    ctes: list[sql.Composable] = [
        sql.SQL(
            "arrived AS (SELECT e.rec, e.rec #>> {path} AS ferryman_source_id,"
            " {version} AS ferryman_version FROM jsonb_array_elements(%(rows)s::jsonb) AS e(rec))"
        ).format(path=path, version=version)
    ]
    written: sql.Composable = _COUNT_SLOTS
    skipped: sql.Composable = _NONE
    fresh: sql.Composable = sql.SQL("arrived")
    if versions.delta:
        fresh = sql.SQL("known WHERE ferryman_known_id IS NULL")
        ctes += [
            _known("a", sql.SQL("a.ferryman_source_id")),
            sql.SQL(
                "revised AS (UPDATE ferryman_landing t SET record = k.rec, run_id = %(run_id)s,"
                " landed_at = now() FROM known k WHERE t.id = k.ferryman_known_id"
                " AND ferryman_version_newer(k.ferryman_version, k.ferryman_known_version)"
                " RETURNING t.id, k.ferryman_source_id, k.ferryman_version)"
            ),
            _REVERSIONED,
        ]
        ctes.append(_GONE)
        written = sql.SQL("{} + (SELECT count(*) FROM revised)").format(_COUNT_SLOTS)
        skipped = sql.SQL(
            "(SELECT count(*) FROM known WHERE ferryman_known_id IS NOT NULL)"
            " - (SELECT count(*) FROM revised)"
        )
    ctes += [
        sql.SQL(
            "slots AS (INSERT INTO ferryman_landing (workspace, kind, source_id, record, run_id)"
            " SELECT %(workspace)s, %(kind)s, ferryman_source_id, rec, %(run_id)s FROM {}"
            " RETURNING id AS ferryman_row_id, source_id AS ferryman_source_id)"
        ).format(fresh),
        sql.SQL(
            "claimed AS (INSERT INTO ferryman_ledger"
            " (workspace, kind, source_id, row_id, run_id, source_version)"
            " SELECT %(workspace)s, %(kind)s, s.ferryman_source_id, s.ferryman_row_id,"
            " %(run_id)s, a.ferryman_version"
            " FROM slots s JOIN arrived a ON a.ferryman_source_id = s.ferryman_source_id)"
        ),
    ]
    composed = sql.SQL("WITH {} {}").format(
        sql.SQL(",\n").join(ctes), _tail(tail, written, skipped)
    )
    return composed.as_bytes(None)
