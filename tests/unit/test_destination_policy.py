"""Where the installation lets mappings write, and what a kind's workspace column must be: pure
decisions from names (the catalog and the writer apply them, see
tests/integration/test_destination_tenancy.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ferryman_worker.destination_policy import Policy
from ferryman_worker.destinations import generate
from ferryman_worker.destinations.mapping import parse
from ferryman_worker.errors import MappingInvalid


def _kind(**more: Any) -> dict[str, Any]:
    columns = {"workspace": {"constant": "workspace"}, "email": {"field": "/email"}}
    return {"table": "people", "workspaceColumn": "workspace", "columns": columns, **more}


@pytest.mark.parametrize(
    "table",
    ["public.ferryman_runs", "app.ferryman_ledger", "ferryman_jobs", "pg_catalog.pg_authid",
     "information_schema.tables", "pg_temp_3.t"],
)  # fmt: skip
def test_ferrymans_and_postgresqls_tables_are_never_allowed(table: str) -> None:
    allowed = Policy(schemas=("public", "app"), tables=("pg_catalog.pg_authid",))
    assert allowed.table_refused(table, "kinds.x.table") is not None


def test_a_table_is_allowed_by_its_schema_or_by_name() -> None:
    allowed = Policy(schemas=("app",), tables=("crm.people",))
    assert allowed.table_refused("app.people", "at") is None
    assert allowed.table_refused("people", "at") is None  # read in the first schema
    assert allowed.table_refused("crm.people", "at") is None
    refused = allowed.table_refused("crm.deals", "kinds.deals.table")
    assert refused is not None
    assert refused.startswith("kinds.deals.table: crm.deals is not a table this installation")
    assert "schemas and tables allowed: app, crm.people" in refused


def test_a_table_without_a_workspace_column_needs_the_installations_leave() -> None:
    assert Policy(unscoped=True).unscoped_refused("public.t", "kinds.t") is None
    refused = Policy().unscoped_refused("public.t", "kinds.t")
    assert refused is not None and refused.startswith("kinds.t.workspaceColumn: public.t")


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ({"value": "other"}, "columns.workspace: the workspace column is mapped to something"),
        ({"field": "/ws"}, "columns.workspace: the workspace column is mapped to something"),
        ({"constant": "run"}, "columns.workspace: the workspace column is mapped to something"),
        (None, "columns.workspace: the workspace column is not mapped"),
    ],
)
def test_the_workspace_column_is_always_the_runs_workspace(
    column: dict[str, Any] | None, message: str
) -> None:
    kind = _kind()
    if column is None:
        del kind["columns"]["workspace"]
    else:
        kind["columns"]["workspace"] = column
    with pytest.raises(MappingInvalid) as refused:
        parse({"provider": "crm", "kinds": {"people": kind}})
    assert f"kinds.people: {message}" in str(refused.value)
    assert "map it as workspace: {constant: workspace}" in str(refused.value)


def test_a_natural_key_includes_the_workspace_column() -> None:
    kind = _kind(naturalKey={"columns": ["email"], "onExisting": "update"})
    with pytest.raises(MappingInvalid, match="add workspace to it"):
        parse({"provider": "crm", "kinds": {"people": kind}})
    kind["naturalKey"]["columns"] = ["workspace", "email"]
    assert parse({"provider": "crm", "kinds": {"people": kind}}).kinds["people"].natural_key


@pytest.mark.parametrize(
    "type_",
    ["numeric(12,2)", "timestamp(3) with time zone", "text[]", "app.mood", "character varying(80)",
     "double precision", "integer[][]"],
)  # fmt: skip
def test_a_column_type_of_the_catalogs_spelling_is_a_type(type_: str) -> None:
    assert generate.column_type(type_).as_string(None) == type_


@pytest.mark.parametrize(
    "type_",
    ["text)), x AS (UPDATE ferryman_runs SET workspace = 'a' RETURNING 1", "text; DROP TABLE t",
     "int -- x", '"char"', "text collate \"C\"", "numeric(1+1)"],
)  # fmt: skip
def test_anything_else_never_reaches_a_statement_as_a_type(type_: str) -> None:
    with pytest.raises(MappingInvalid, match="is not a type name"):
        generate.column_type(type_)
    stored = {"types": {"name": type_}, "sequence": "s"}
    with pytest.raises(MappingInvalid, match="stored catalog is not valid"):
        generate.KindCatalog.from_json(stored)
