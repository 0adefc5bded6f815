"""A mapped column: where its value comes from, one model per form, each composing the SQL that
reads its value.

In YAML a column is one key naming its form (``field``, ``constant``, ``value``, ``reference``)
beside the keys every form takes (``cast``) and those of its own (a field's ``default``).
``Column`` validates it as the form its keys name (a discriminated union); a column naming no
form, two, or a key of another form is validated as the whole shape of a column (every form's
keys: the published schema and reference, ``shape_of``), which refuses it naming the fix. A new
form is one ``ColumnForm`` subclass added to ``FORMS``: the shape, the refusals, the schema and
the reference follow from it, and its SQL is its own.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import functools
import re
from typing import Annotated, Any, ClassVar, Final, NamedTuple, Protocol, Self

from psycopg import sql
from pydantic import (
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    create_model,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from ferryman_worker.destinations.document import Identifier, Model, Pointer, Scalar, SqlType
from ferryman_worker.errors import MappingInvalid

COLUMN_TYPE: Final = (
    r"^([a-z_][a-z0-9_]*\.)?[a-z_][a-z0-9_]*( [a-z_][a-z0-9_]*)*( ?\(\d+( ?, ?\d+)?\))?"
    r"( with(out)? time zone)?(\[\])*$"
)
"""A column's type as the catalog prints it (``format_type``), e.g. ``numeric(12,2)``,
``timestamp(3) with time zone``, ``text[]``, ``app.mood``: lowercase words, a schema, digits in
a typmod and array brackets; no quote, operator or other parenthesis, so no SQL of its own. The
one form a type is spliced into a statement in (``column_type``), checked where it is
composed."""

_COLUMN_TYPE: Final = re.compile(COLUMN_TYPE)


def column_type(type_: str) -> sql.SQL:
    """A type as SQL, once it is seen to be a type name (``COLUMN_TYPE``); MappingInvalid
    otherwise, so that nothing else is ever spliced into a statement as a type."""
    if not _COLUMN_TYPE.fullmatch(type_):
        raise MappingInvalid(
            f"{type_[:80]!r} is not a type name: a writer takes its types from the catalog only"
        )
    return sql.SQL(type_)  # a validated type name


class Unresolved(enum.StrEnum):
    """What a reference does when the record it names has not been imported."""

    NULL = "null"
    """Write NULL; the kinds may be imported side by side (no phase order)."""

    WAIT = "wait"
    """Import the referenced kind in an earlier phase; what is still missing then is NULL."""

    REFUSE = "refuse"
    """Import the referenced kind first; a row whose reference is still missing is refused,
    recorded with its reason."""


class Constant(enum.StrEnum):
    """A value the run knows."""

    WORKSPACE = "workspace"
    RUN = "run"
    KIND = "kind"
    NOW = "now"
    """The time of the transaction that writes the row (PostgreSQL's now())."""

    def as_sql(self) -> sql.Composable:
        """The value in a writer's statement (a parameter every writer is given, or now())."""
        return _CONSTANTS[self]


_CONSTANTS: Final = {
    Constant.WORKSPACE: sql.SQL("%(workspace)s::text"),
    Constant.RUN: sql.SQL("%(run_id)s::bigint"),
    Constant.KIND: sql.SQL("%(kind)s::text"),
    Constant.NOW: sql.SQL("now()"),
}


class Reference(Model):
    """A destination id taken from the ledger: the row ferryman wrote (or matched) for another
    record, named in this record by its source id."""

    kind: Identifier
    """The referenced kind, e.g. organizations; it needs a mapping too."""

    field: Pointer
    """JSON pointer to the referenced record's source id in this record, e.g. /org_id."""

    unresolved: Unresolved = Unresolved.WAIT
    """When the referenced record is not (yet) imported: null, wait or refuse."""


class Reader(Protocol):
    """The window's records as a writer's statement reads them (``generate``)."""

    def read(self, pointer: str, type_: str, alias: str = "r") -> sql.Composable:
        """The value at ``pointer`` as ``type_``."""
        ...


class Read(NamedTuple):
    """A record field a column's value reads."""

    path: str
    """Its key's YAML path within the column, e.g. reference.field."""

    pointer: str
    """The JSON pointer read."""

    type: str | None
    """The type it is read as; None: the column's own (such reads declare the record's field
    first, so it is parsed once, as its column takes it)."""


class ColumnForm(Model):
    """What every form of a column has. A form names itself by ``key``, its field of that
    name; its other fields are its own (or, declared here, every form's)."""

    cast: SqlType | None = None
    """PostgreSQL type the value is read as before it is stored, e.g. timestamptz; absent: the
    column's own type."""

    key: ClassVar[str]
    """The field naming the form in YAML."""

    elsewhere: ClassVar[str] = "remove it"
    """What to do with a key of this form's own given with another form."""

    @abc.abstractmethod
    def expression(self, record: Reader, type_: str, alias: str) -> sql.Composable:
        """The column's value for one record (``record`` read as ``r``), of type ``type_``;
        ``alias`` names the joins it uses (``joins``)."""

    def joins(self, record: Reader, alias: str) -> list[sql.Composable]:
        """The lateral joins the expression reads from, named ``alias``."""
        return []

    def reads(self) -> list[Read]:
        """The record fields the value reads."""
        return []

    def references(self) -> list[tuple[str, Reference]]:
        """The ledger references the value is read through, each with its YAML path within
        the column: each referenced kind needs a mapping, and orders the phases."""
        return []


class FieldColumn(ColumnForm):
    """A value read from the record."""

    key: ClassVar[str] = "field"
    elsewhere: ClassVar[str] = "remove it, or use value"

    field: Pointer
    """JSON pointer into the record, e.g. /name or /address/city."""

    default: Scalar | None = None
    """Value stored when the field is missing or null."""

    def expression(self, record: Reader, type_: str, alias: str) -> sql.Composable:
        value = record.read(self.field, type_)
        if self.default is None:
            return value
        return sql.SQL("COALESCE({}, {}::{})").format(
            value, sql.Literal(self.default), column_type(type_)
        )

    def reads(self) -> list[Read]:
        return [Read("field", self.field, None)]


class ConstantColumn(ColumnForm):
    """A value the run knows."""

    key: ClassVar[str] = "constant"

    constant: Constant
    """The run's workspace, id, the kind's name, or now (when the row is written)."""

    def expression(self, record: Reader, type_: str, alias: str) -> sql.Composable:
        return self.constant.as_sql()


class ValueColumn(ColumnForm):
    """The same value in every row."""

    key: ClassVar[str] = "value"

    value: Scalar
    """A fixed value."""

    def expression(self, record: Reader, type_: str, alias: str) -> sql.Composable:
        return sql.SQL("{}::{}").format(sql.Literal(self.value), column_type(type_))


class ReferenceColumn(ColumnForm):
    """A destination id from the ledger."""

    key: ClassVar[str] = "reference"

    reference: Reference
    """A destination id from the ledger."""

    def expression(self, record: Reader, type_: str, alias: str) -> sql.Composable:
        reference = self.reference
        found = sql.SQL("{}.row_id").format(sql.Identifier(alias))
        if reference.unresolved is not Unresolved.REFUSE:
            return found
        return sql.SQL(
            "CASE WHEN {source} IS NOT NULL AND {found} IS NULL"
            " THEN ferryman_unresolved({kind}, {source}) ELSE {found} END"
        ).format(source=self._source(record), found=found, kind=sql.Literal(reference.kind))

    def joins(self, record: Reader, alias: str) -> list[sql.Composable]:
        return [
            sql.SQL(
                "LEFT JOIN LATERAL (SELECT l.row_id FROM ferryman_ledger l"
                " WHERE l.workspace = %(workspace)s AND l.kind = {kind} AND l.source_id = {source}"
                " LIMIT 1) {alias} ON true"
            ).format(
                kind=sql.Literal(self.reference.kind),
                source=self._source(record),
                alias=sql.Identifier(alias),
            )
        ]

    def reads(self) -> list[Read]:
        return [Read("reference.field", self.reference.field, "text")]

    def references(self) -> list[tuple[str, Reference]]:
        return [("reference", self.reference)]

    def _source(self, record: Reader) -> sql.Composable:
        return record.read(self.reference.field, "text")


FORMS: Final[tuple[type[ColumnForm], ...]] = (
    FieldColumn,
    ConstantColumn,
    ValueColumn,
    ReferenceColumn,
)
"""The forms of a column, in the order the shape and its refusals list them."""

SHAPE_TAG: Final = "(column)"


def tag(form: type[ColumnForm]) -> str:
    """The branch name pydantic puts in an error's location for ``form``."""
    return f"({form.key})"


TAGS: Final = (*(tag(form) for form in FORMS), SHAPE_TAG)
"""The union's branch names in an error's location; not part of the YAML path."""


class ColumnShape(Model):
    """The base of a column's whole shape: every form's keys (``shape_of``). It validates a
    column that names no form, several, or a key of another form, and refuses it; else it is
    the column's form (``form``)."""

    forms: ClassVar[tuple[type[ColumnForm], ...]] = ()

    @model_validator(mode="after")
    def _one_form(self) -> Self:
        given = [form.key for form in self.forms if getattr(self, form.key) is not None]
        if len(given) != 1:
            keys = [form.key for form in self.forms]
            raise PydanticCustomError(
                "column_source",
                "give exactly one of {forms} (got {given})",
                {
                    "forms": ", ".join(keys[:-1]) + " or " + keys[-1],
                    "given": ", ".join(given) or "none",
                },
            )
        chosen = self._chosen()
        for name in type(self).model_fields:
            if getattr(self, name) is None or name in chosen.model_fields:
                continue
            owner = next(form for form in self.forms if name in form.model_fields)
            raise PydanticCustomError(
                f"column_{name}",
                "{name} only applies to a {owner}: {fix}",
                {"name": name, "owner": owner.key, "fix": owner.elsewhere},
            )
        return self

    def _chosen(self) -> type[ColumnForm]:
        return next(form for form in self.forms if getattr(self, form.key) is not None)

    def form(self) -> ColumnForm:
        """The column as its form (its keys given, checked by ``_one_form``)."""
        chosen = self._chosen()
        given = {name: getattr(self, name) for name in chosen.model_fields}
        return chosen.model_validate({k: v for k, v in given.items() if v is not None})


@functools.cache
def shape_of(forms: tuple[type[ColumnForm], ...]) -> type[ColumnShape]:
    """A column's whole shape with ``forms``: each form's key (optional here), then the other
    keys the forms take, in the order first declared."""
    fields: dict[str, Any] = {}
    for form in forms:
        info = form.model_fields[form.key]
        fields[form.key] = (
            info.rebuild_annotation() | None,
            Field(None, description=info.description),
        )
    for form in forms:
        for name, info in form.model_fields.items():
            fields.setdefault(
                name, (info.rebuild_annotation(), Field(info.default, description=info.description))
            )
    keys = ", ".join(form.key for form in forms)
    shape = create_model(
        "Column",
        __base__=ColumnShape,
        __doc__=f"Where one column's value comes from: exactly one of {keys}.",
        __module__=__name__,
        **fields,
    )
    shape.forms = forms
    return shape


def _names(value: dict[str, Any], form: type[ColumnForm]) -> bool:
    """Whether ``value`` gives ``form``'s key (not null)."""
    alias = form.model_fields[form.key].alias or form.key
    return value.get(alias, value.get(form.key)) is not None


def _takes(form: type[ColumnForm], key: str) -> bool:
    """Whether ``form`` has a field named (or aliased) ``key``."""
    return any(key in (name, info.alias) for name, info in form.model_fields.items())


@dataclasses.dataclass(frozen=True)
class Forms:
    """Validates a column as one of ``forms`` (``Annotated[ColumnForm, Forms(FORMS)]``), and
    publishes their shape as its schema."""

    forms: tuple[type[ColumnForm], ...]

    @property
    def shape(self) -> type[ColumnShape]:
        return shape_of(self.forms)

    def branch(self, value: Any) -> str:
        """The branch validating ``value``: the form its keys name, when they name one and are
        all that form's; else the whole shape."""
        if isinstance(value, ColumnForm) and type(value) in self.forms:
            return tag(type(value))
        if isinstance(value, dict):
            named = [form for form in self.forms if _names(value, form)]
            if len(named) == 1 and all(_takes(named[0], key) for key in value):
                return tag(named[0])
        return SHAPE_TAG

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        choices: dict[str, core_schema.CoreSchema] = {
            tag(form): handler.generate_schema(form) for form in self.forms
        }
        choices[SHAPE_TAG] = core_schema.no_info_after_validator_function(
            ColumnShape.form, handler.generate_schema(self.shape)
        )
        return core_schema.tagged_union_schema(choices, discriminator=self.branch)

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        assert schema["type"] == "tagged-union"
        return handler(schema["choices"][SHAPE_TAG])  # the shape's, after which it is a form


Column = Annotated[ColumnForm, Forms(FORMS)]
"""Where one column's value comes from: the form its keys name."""

SHAPE: Final = shape_of(FORMS)
"""A column's whole shape, as the schema and the reference publish it."""
