"""The mapping model: what a valid mapping is, the phase order it gives, its generated reference."""

from __future__ import annotations

import pathlib
import re
from typing import Annotated, Any, ClassVar

import pytest
from psycopg import sql
from pydantic import BaseModel, ValidationError

from ferryman_worker import destinations
from ferryman_worker.destinations import columns, reference
from ferryman_worker.destinations.mapping import (
    Constant,
    Mapping,
    OnDeleted,
    SoftDelete,
    parse,
)
from ferryman_worker.errors import ConfigurationError

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _mapping(**kinds: Any) -> Mapping:
    return parse({"provider": "shop", "kinds": kinds})


def _kind(table: str, **columns: Any) -> dict[str, Any]:
    return {"table": table, "columns": {"name": {"field": "/name"}, **columns}}


def _ref(kind: str, unresolved: str = "wait") -> dict[str, Any]:
    return {"reference": {"kind": kind, "field": f"/{kind}_id", "unresolved": unresolved}}


def test_the_shipped_demo_crm_mapping_orders_its_kinds_as_the_provider_does() -> None:
    mapping = destinations.builtin("democrm")
    assert mapping is not None
    phases = [["organizations"], ["people"], ["deals"], ["messages"]]
    flat = [[k for phase in phases for k in phase]]
    assert mapping.phases_for(flat, {"messages": "deals"}) == phases


def test_references_that_wait_or_refuse_order_the_phases_and_null_does_not() -> None:
    mapping = _mapping(
        customers=_kind("customers"),
        orders=_kind("orders", customer_id=_ref("customers", "refuse")),
        notes=_kind("notes", customer_id=_ref("customers", "null")),
    )
    phases = mapping.phases_for([["notes", "orders", "customers"]], {})
    assert phases == [["notes", "customers"], ["orders"]]


def test_a_kind_without_a_mapping_keeps_the_providers_order() -> None:
    mapping = _mapping(customers=_kind("customers"))
    assert mapping.phases_for([["customers"], ["orders"]], {}) == [["customers"], ["orders"]]


def test_a_cycle_of_references_is_refused_naming_it() -> None:
    mapping = _mapping(
        a=_kind("a", b_id=_ref("b")), b=_kind("b", c_id=_ref("c")), c=_kind("c", a_id=_ref("a"))
    )
    with pytest.raises(ConfigurationError, match=r"cycle: a -> b -> c -> a"):
        mapping.phases_for([["a", "b", "c"]], {})


def test_declared_phases_must_name_every_kind() -> None:
    mapping = parse({"provider": "shop", "phases": [["a"]], "kinds": {"a": _kind("a")}})
    assert mapping.phases_for([["a"]], {}) == [["a"]]
    with pytest.raises(ConfigurationError, match=r"mapping.phases: \['b'\] are not in any phase"):
        mapping.phases_for([["b", "a"]], {})


@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        (
            _kind("t", extra={"field": "/x", "constant": "workspace"}),
            "kinds.k.columns.extra: give exactly one of field, constant, value or "
            "reference (got field, constant)",
        ),
        (
            _kind("t", extra={}),
            "got none",
        ),
        (
            {**_kind("t"), "naturalKey": {"columns": ["email"]}},
            "naturalKey.columns: email not in columns; map them",
        ),
        (_kind("t", id={"field": "/id"}), "columns.id: the id column is filled by its sequence"),
        (_kind("t", x={"field": "name"}), "kinds.k.columns.x.field: String should match pattern"),
        (_kind("t", x={"field": "/a", "cast": "int; drop table t"}), "kinds.k.columns.x.cast"),
        ({**_kind("t"), "colour": "red"}, "kinds.k.colour: Extra inputs are not permitted"),
        (_kind("t", x={"value": 1, "default": 2}), "default only applies to a field"),
        (
            {**_kind("t"), "onDeleted": "remove"},
            "kinds.k.onDeleted: Input should be 'record' or 'delete'",
        ),
        ({**_kind("t"), "onDeleted": 3}, "kinds.k.onDeleted: give record, delete or {set:"),
        (
            {**_kind("t"), "onDeleted": {"set": {"archived": {}}}},
            "kinds.k.onDeleted.set.archived: give exactly one of constant or value",
        ),
        ({**_kind("t"), "onDeleted": {"set": {}}}, "kinds.k.onDeleted.set: Dictionary should"),
        (
            {**_kind("t"), "onDeleted": {"set": {"id": {"value": 0}}}},
            "kinds.k: onDeleted.set.id: the id column names the row; set other columns",
        ),
        (
            {**_kind("t"), "naturalKey": {"columns": ["name"]}, "onDeleted": "delete"},
            "kinds.k: onDeleted: naturalKey.onExisting is skip, so a delta leaves the "
            "application's rows as they are: use onDeleted: record, or onExisting: update",
        ),
    ],
)
def test_a_bad_mapping_is_refused_naming_the_field(kind: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse({"provider": "shop", "kinds": {"k": kind}}, source="m.yaml")
    assert problem in str(caught.value)
    assert str(caught.value).startswith("m.yaml: not a valid mapping:")


def test_the_generated_reference_and_schema_are_up_to_date() -> None:
    stale = reference.write(ROOT, check=True)
    assert not stale, f"{stale} are stale: run hack/gen-mapping-docs"


def test_on_deleted_is_record_unless_it_says_delete_or_set() -> None:
    soft = {"set": {"deleted_at": {"constant": "now"}, "archived": {"value": False}}}
    mapping = _mapping(a=_kind("a"), b={**_kind("b"), "onDeleted": "delete"},
                       c={**_kind("c"), "onDeleted": soft})  # fmt: skip
    kinds = mapping.kinds
    assert kinds["a"].on_deleted is OnDeleted.RECORD
    assert kinds["b"].on_deleted is OnDeleted.DELETE
    marked = kinds["c"].on_deleted
    assert isinstance(marked, SoftDelete)
    assert marked.set["deleted_at"].constant is Constant.NOW
    assert marked.set["archived"].value is False
    assert destinations.mapping.dump(mapping)["kinds"]["c"]["onDeleted"] == soft
    assert "onDeleted" not in destinations.mapping.dump(mapping)["kinds"]["a"]


class _Setting(columns.ColumnForm):
    """A PostgreSQL setting read where the row is written (a form of this test's own)."""

    key: ClassVar[str] = "setting"

    setting: str
    """The setting's name, e.g. app.region."""

    def expression(self, record: columns.Reader, type_: str, alias: str) -> sql.Composable:
        return sql.SQL("current_setting({})::{}").format(
            sql.Literal(self.setting), columns.column_type(type_)
        )


class _Record:
    def read(self, pointer: str, type_: str, alias: str = "r") -> sql.Composable:
        return sql.SQL("{}::{}").format(sql.Identifier(alias, pointer[1:]), sql.SQL(type_))


def test_each_column_form_is_one_model_with_its_own_sql_and_the_shape_follows() -> None:
    page = reference.markdown()
    for form in columns.FORMS:
        assert "expression" in vars(form), f"{form.__name__} composes its own value"
        assert form.key in columns.SHAPE.model_fields
        assert f"| `{form.key}` |" in page
        assert columns.tag(form) in destinations.mapping.TAGS
    kind = _mapping(k={"table": "t", "columns": {
        "a": {"field": "/a", "default": 0}, "b": {"constant": "run"}, "c": {"value": 2},
        "d": {"reference": {"kind": "k", "field": "/d", "unresolved": "null"}, "cast": "int"},
    }}).kinds["k"]  # fmt: skip
    found = {
        n: c.expression(_Record(), "int", "ref").as_string(None) for n, c in kind.columns.items()
    }
    assert found == {
        "a": 'COALESCE("r"."a"::int, 0::int)',
        "b": "%(run_id)s::bigint",
        "c": "2::int",
        "d": '"ref".row_id',
    }
    assert kind.columns["d"].cast == "int"


def test_a_new_column_form_is_one_class_the_shape_and_its_refusals_follow() -> None:
    forms = (*columns.FORMS, _Setting)

    class Table(BaseModel):
        mapped: dict[str, Annotated[columns.ColumnForm, columns.Forms(forms)]]

    table = Table.model_validate({"mapped": {"a": {"setting": "app.region", "cast": "text"}}})
    column = table.mapped["a"]
    assert isinstance(column, _Setting) and column.cast == "text"
    assert column.expression(_Record(), "text", "ref").as_string(None) == (
        "current_setting('app.region')::text"
    )
    shape = columns.shape_of(forms)
    assert list(shape.model_fields) == [
        "field", "constant", "value", "reference", "setting", "cast", "default"
    ]  # fmt: skip
    published = Table.model_json_schema()["$defs"]["Column"]
    assert (
        published["properties"]["setting"]["description"] == "The setting's name, e.g. app.region."
    )
    assert published["description"].endswith(
        "exactly one of field, constant, value, reference, setting."
    )
    for given, problem in [
        ({"setting": "x", "field": "/x"}, "value, reference or setting (got field, setting)"),
        (
            {"setting": "x", "default": 1},
            "default only applies to a field: remove it, or use value",
        ),
    ]:
        with pytest.raises(ValidationError, match=re.escape(problem)):
            Table.model_validate({"mapped": {"a": given}})
