"""A mapping: where each kind's records go in the application's own tables.

The provider describes the source (the same for every customer of an API); a mapping belongs to
the application (one per application and provider). It names, per kind, an existing table (ferryman
never creates or alters application tables) and fills its columns from the record (JSON
pointers), from constants (the workspace, the run, the kind, a fixed value) or from the ledger
(references: the destination id of another imported record): a column's forms, each with the
SQL of its value, are ``destinations.columns``. A many-to-many relation is written
through a join table; rows the application already has are matched on a natural key. The writer
of each kind is generated from its mapping (``destinations.generate``) and checked against the
database's catalog at admission (``destinations.catalog``).
"""

from __future__ import annotations

import enum
import json
import os
import pathlib
from typing import Annotated, Any, Final, Self

import yaml
from pydantic import (
    Discriminator,
    Field,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ferryman_worker.destinations import columns
from ferryman_worker.destinations.columns import Column, Constant, ConstantColumn, Unresolved
from ferryman_worker.destinations.document import Identifier, Model, Pointer, Scalar, TableName
from ferryman_worker.errors import ConfigurationError, MappingInvalid


class OnExisting(enum.StrEnum):
    """What to do with a record whose natural key matches a row the application already has."""

    SKIP = "skip"
    """Leave the row as it is; the ledger records its id, so references to the record resolve."""

    UPDATE = "update"
    """Update the row's mapped columns; the ledger records its id."""

    FAIL = "fail"
    """Refuse the record, recorded with the database's reason (the unique index's violation)."""


class OnDeleted(enum.StrEnum):
    """What a delta run does to the application's row of a record its source reports deleted."""

    RECORD = "record"
    """Record the deletion in the ledger (ferryman_ledger.source_deleted_at); the row stays."""

    DELETE = "delete"
    """Delete the row the ledger names, and record the deletion. A row the database refuses to
    delete (a foreign key of another row) is a row error with the database's reason; its
    deletion is not recorded, so a delta that lists it again tries again."""


class Stored(Model):
    """A value a soft delete stores in a column: exactly one of constant, value."""

    constant: Constant | None = None
    """A value the run knows, e.g. now (the time the deletion is written)."""

    value: Scalar | None = None
    """A fixed value, e.g. true; read as the column's type."""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.constant is None) == (self.value is None):
            raise PydanticCustomError(
                "stored_source", "give exactly one of constant or value, e.g. {constant: now}"
            )
        return self


class SoftDelete(Model):
    """Mark the row deleted instead of deleting it: set these columns of the row the ledger
    names, and record the deletion."""

    set: Annotated[dict[Identifier, Stored], Field(min_length=1)]
    """Column -> the value it takes, e.g. {deleted_at: {constant: now}} or
    {archived: {value: true}}."""


_SOFT_TAG: Final = "(set)"
_ACTION_TAG: Final = "(action)"
TAGS: Final = (_SOFT_TAG, _ACTION_TAG, *columns.TAGS)
"""The union's branch names pydantic puts in an error's location; not part of the YAML path."""


def _on_deleted_branch(value: Any) -> str | None:
    if isinstance(value, str):
        return _ACTION_TAG
    if isinstance(value, dict | SoftDelete):
        return _SOFT_TAG
    return None


OnDeletedAction = Annotated[
    Annotated[OnDeleted, Tag(_ACTION_TAG)] | Annotated[SoftDelete, Tag(_SOFT_TAG)],
    Discriminator(
        _on_deleted_branch,
        custom_error_type="on_deleted",
        custom_error_message="give record, delete or {set: {column: {value: ...}}}",
    ),
]


class Join(Model):
    """A many-to-many relation written through a join table: one row per (this record, each
    referenced record) pair; a pair whose referenced record is not imported is left out."""

    table: TableName
    """The join table, e.g. crm_deal_people."""

    column: Identifier
    """Its column holding this row's id, e.g. deal_id."""

    other_column: Identifier
    """Its column holding the referenced row's id, e.g. person_id."""

    kind: Identifier
    """The referenced kind, e.g. people."""

    field: Pointer
    """JSON pointer to the array of referenced source ids in this record, e.g. /person_ids."""


class NaturalKey(Model):
    """Columns that identify a row the application may already have (a unique index must cover
    exactly them), and what to do when one matches."""

    columns: Annotated[list[Identifier], Field(min_length=1)]
    """Mapped columns, e.g. [workspace, email]."""

    on_existing: OnExisting = OnExisting.SKIP
    """skip, update or fail."""


def _no_published_default(schema: dict[str, Any]) -> None:
    """Leave a default out of the published schema: the API server would fill it into every
    stored object, and a value present there means "given" where absent means "the provider's"."""
    schema.pop("default", None)


class KindMapping(Model):
    """One kind's destination: a table of the application and its columns."""

    table: TableName
    """The application's table, e.g. crm_people or app.people; one the installation allows
    (its schemas, never ferryman's own tables)."""

    workspace_column: Identifier | None = None
    """The table's column naming each row's workspace, e.g. workspace: mapped as
    {constant: workspace}, it is always the run's own, and every match, update and delete of the
    kind's rows is held to it. Absent: the table keeps no workspace apart, which only a
    single-tenant installation allows."""

    id: Identifier = "id"
    """Its primary key, filled by a sequence (serial or identity): the ledger keeps it."""

    source_id: Annotated[Pointer, Field(json_schema_extra=_no_published_default)] = "/id"
    """JSON pointer to the record's source id; absent: the provider's declared id of the kind
    (/id unless it declares another)."""

    columns: Annotated[dict[Identifier, Column], Field(min_length=1)]
    """Column name -> where its value comes from."""

    joins: list[Join] = Field(default_factory=list)
    """Many-to-many relations written through join tables."""

    natural_key: NaturalKey | None = None
    """Matching rows the application already has; absent: every record is a new row."""

    on_deleted: OnDeletedAction = OnDeleted.RECORD
    """What a delta run does to the row of a record its source reports deleted: record
    (the ledger notes it, the row stays), delete (the row is deleted), or
    {set: {column: {value: ...}}} (a soft delete, e.g. {set: {deleted_at: {constant: now}}})."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.id in self.columns:
            raise PydanticCustomError(
                "id_mapped",
                "columns.{id}: the id column is filled by its sequence; remove it from columns",
                {"id": self.id},
            )
        self._check_workspace()
        if self.natural_key is not None:
            unmapped = [c for c in self.natural_key.columns if c not in self.columns]
            if unmapped:
                raise PydanticCustomError(
                    "natural_key_unmapped",
                    "naturalKey.columns: {unmapped} not in columns; map them",
                    {"unmapped": ", ".join(unmapped)},
                )
            skip = self.natural_key.on_existing is OnExisting.SKIP
            if skip and self.on_deleted is not OnDeleted.RECORD:
                raise PydanticCustomError(
                    "on_deleted_skip",
                    "onDeleted: naturalKey.onExisting is skip, so a delta leaves the "
                    "application's rows as they are: use onDeleted: record, or onExisting: update",
                )
        if isinstance(self.on_deleted, SoftDelete) and self.id in self.on_deleted.set:
            raise PydanticCustomError(
                "on_deleted_id",
                "onDeleted.set.{id}: the id column names the row; set other columns",
                {"id": self.id},
            )
        return self

    def _check_workspace(self) -> None:
        """The workspace column is the run's workspace, and a natural key matches within it."""
        name = self.workspace_column
        if name is None:
            return
        column = self.columns.get(name)
        workspace = isinstance(column, ConstantColumn) and column.constant is Constant.WORKSPACE
        if not workspace:
            given = "is not mapped" if column is None else "is mapped to something else"
            raise PydanticCustomError(
                "workspace_column",
                "columns.{name}: the workspace column {given}; a run writes only its own "
                "workspace's rows: map it as {name}: {constant: workspace}",
                {"name": name, "given": given},
            )
        if isinstance(self.on_deleted, SoftDelete) and name in self.on_deleted.set:
            raise PydanticCustomError(
                "on_deleted_workspace",
                "onDeleted.set.{name}: the workspace column is the run's own; set other columns",
                {"name": name},
            )
        if self.natural_key is not None and name not in self.natural_key.columns:
            raise PydanticCustomError(
                "natural_key_workspace",
                "naturalKey.columns: a key without the workspace column {name} matches rows of "
                "every workspace: add {name} to it (and to its unique index)",
                {"name": name},
            )

    def references(self) -> list[tuple[str, Unresolved]]:
        """The kinds this one references (columns and joins), with their policies."""
        found = [
            (reference.kind, reference.unresolved)
            for column in self.columns.values()
            for _, reference in column.references()
        ]
        return found + [(j.kind, Unresolved.WAIT) for j in self.joins]


class Mapping(Model):
    """Where a provider's records go in this application's tables."""

    provider: Identifier
    """The provider whose records this maps, e.g. democrm."""

    kinds: dict[Identifier, KindMapping] = Field(default_factory=dict)
    """Kind -> its destination; a kind without one lands as jsonb rows in ferryman_landing."""

    phases: list[list[Identifier]] | None = None
    """Phase order, declared; absent: derived from the references."""

    def phases_for(self, phases: list[list[str]], parents: dict[str, str]) -> list[list[str]]:
        """The provider's ``phases`` of the run's kinds, ordered by this mapping: as declared,
        or each mapped kind after the kinds it waits for (references that wait or refuse,
        joins, and a tree kind's ``parents``); a kind without a mapping keeps its place after
        the provider's earlier phases. ConfigurationError names a cycle, or a kind the declared
        phases leave out."""
        kinds = [kind for phase in phases for kind in phase]
        if self.phases is not None:
            listed = [k for phase in self.phases for k in phase]
            missing = [k for k in kinds if k not in listed]
            if missing:
                raise ConfigurationError(
                    f"mapping.phases: {missing} are not in any phase; add them"
                )
            phases = [[k for k in phase if k in kinds] for phase in self.phases]
            return [phase for phase in phases if phase]
        after = {kind: set() for kind in kinds}  # type: dict[str, set[str]]
        earlier: list[str] = []
        for phase in phases:
            for kind in phase:
                if kind not in self.kinds:
                    after[kind].update(earlier)
            earlier.extend(phase)
        for kind in kinds:
            if kind in parents and parents[kind] in after:
                after[kind].add(parents[kind])
            mapped = self.kinds.get(kind)
            for other, policy in mapped.references() if mapped else []:
                if policy is not Unresolved.NULL and other in after and other != kind:
                    after[kind].add(other)
        return _layers(after)


def _layers(after: dict[str, set[str]]) -> list[list[str]]:
    """Kahn's layers, kinds in their given order within a layer; a cycle is named."""
    done: set[str] = set()
    layers: list[list[str]] = []
    while len(done) < len(after):
        layer = [k for k, deps in after.items() if k not in done and deps <= done]
        if not layer:
            raise ConfigurationError(
                "mapping: the references form a cycle: "
                + _cycle({k: d - done for k, d in after.items() if k not in done})
                + "; set unresolved: null on one of them, or declare phases"
            )
        layers.append(layer)
        done.update(layer)
    return layers


def _cycle(after: dict[str, set[str]]) -> str:
    path = [next(iter(after))]
    while True:
        nxt = sorted(after[path[-1]])[0]
        if nxt in path:
            loop = [*path[path.index(nxt) :], nxt]
            return " -> ".join(loop)
        path.append(nxt)


def parse(document: object, *, source: str = "<mapping>") -> Mapping:
    """Validate a parsed mapping document; MappingInvalid lists every problem by its path."""
    try:
        return Mapping.model_validate(document, by_alias=True, by_name=False)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in error['loc'] if p not in TAGS) or '(top)'}: {error['msg']}"
            for error in exc.errors(include_input=False, include_url=False)
        ]
    lines = "".join(f"\n  {problem}" for problem in problems)
    raise MappingInvalid(f"{source}: not a valid mapping:{lines}")


def load_file(path: str | os.PathLike[str]) -> Mapping:
    """Read and validate a mapping YAML (or JSON) file."""
    source = os.fspath(path)
    try:
        document = yaml.safe_load(pathlib.Path(source).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"{source}: cannot be read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigurationError(f"{source}: not valid YAML: {where}") from None
    return parse(document, source=source)


def dump(mapping: Mapping) -> dict[str, Any]:
    """The mapping as a JSON document (camelCase keys), as a run keeps its snapshot. A
    ``sourceId`` given is kept even when it is ``/id``: one left out is the provider's declared
    id (``pointers.with_provider_ids``)."""
    result: dict[str, Any] = json.loads(
        mapping.model_dump_json(by_alias=True, exclude_defaults=True)
    )
    for name, kind in mapping.kinds.items():
        if "source_id" in kind.model_fields_set:
            result["kinds"][name]["sourceId"] = kind.source_id
    return result


def json_schema() -> dict[str, Any]:
    """The published JSON Schema of a mapping file."""
    schema = Mapping.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "ferryman mapping"
    return schema
