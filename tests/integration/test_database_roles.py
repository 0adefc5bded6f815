"""The separate database roles of docs/security.md, created with the SQL as written there, on a
real PostgreSQL: the operator's role admits a run but cannot write a destination table; the
workers' role writes destination tables but cannot change the schema."""

from __future__ import annotations

import pathlib
import re

import psycopg
import pytest
from migration import request

from ferryman_worker.db import connect
from ferryman_worker.engine import runs

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "security.md"


def _roles_sql() -> str:
    text = DOC.read_text()
    section = text[text.index("## Separate database roles") :]
    [block] = re.findall(r"```sql\n(.*?)```", section, re.S)
    return str(block)


def _as(db_url: str, role: str) -> psycopg.Connection[dict[str, object]]:
    return connect.connect(psycopg.conninfo.make_conninfo(db_url, user=role))


def test_the_documented_roles_grant_what_each_component_needs_and_no_more(db_url: str) -> None:
    with connect.connect(db_url) as admin:
        for role in ("ferryman_operator", "ferryman_worker", "ferryman_owner"):
            admin.execute(f"DROP OWNED BY {role}" if _exists(admin, role) else "SELECT 1")
            admin.execute(f"DROP ROLE IF EXISTS {role}")
        admin.execute(_roles_sql())  # type: ignore[arg-type]
    with _as(db_url, "ferryman_operator") as operator:
        run = runs.admit(operator, request("http://127.0.0.1:1", kinds=["organizations"]))
        runs.start(operator, run)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            operator.execute(
                "INSERT INTO crm_organizations (workspace, source_id, name) VALUES ('acme', 1, 'x')"
            )
    with _as(db_url, "ferryman_worker") as worker:
        worker.execute(
            "INSERT INTO crm_organizations (workspace, source_id, name) VALUES ('acme', 1, 'x')"
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            worker.execute("CREATE TABLE intruding (id int)")


def _exists(conn: psycopg.Connection[dict[str, object]], role: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None
