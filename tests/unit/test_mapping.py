"""The mapping model: what a valid mapping is, the phase order it gives, its generated reference."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from ferryman_worker import destinations
from ferryman_worker.destinations import reference
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
