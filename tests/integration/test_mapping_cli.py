"""``ferryman mapping check | sample | schema`` against a real PostgreSQL holding the example
application's schema (examples/apps/sales)."""

from __future__ import annotations

import json
import os
import pathlib

import pytest
import yaml

from ferryman_worker import cli
from ferryman_worker.db import connect, databases

APP = pathlib.Path(__file__).resolve().parents[2] / "examples" / "apps" / "sales"
SALES = ["--destination-schemas", "sales"]
"""The example application\'s schema, allowed."""


@pytest.fixture
def app_url(db_url: str) -> str:
    with connect.connect(db_url) as conn:
        conn.execute((APP / "schema.sql").read_text())  # type: ignore[arg-type]
    return db_url


def test_check_says_the_example_mapping_fits(
    app_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["mapping", "check", str(APP / "mapping.yaml"), "--database", app_url, *SALES])
    assert (code, capsys.readouterr().out) == (
        0,
        "the mapping fits this database: organizations, people, deals, notes\n",
    )


def test_check_prints_one_line_per_problem(
    app_url: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = yaml.safe_load((APP / "mapping.yaml").read_text())
    document["kinds"]["people"]["table"] = "sales.persons"
    document["kinds"]["deals"]["columns"]["amount"]["cast"] = "money_bags"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(document))
    code = cli.main(["mapping", "check", str(path), "--database", app_url, *SALES])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert sorted(out) == [
        "kinds.deals.columns.amount.cast: there is no type 'money_bags' in this database",
        "kinds.people.table: there is no table sales.persons in this database; ferryman never "
        "creates application tables: create it with the application's own migrations",
    ]


def test_check_on_a_database_without_ferrymans_tables_names_the_migration(
    pg_admin_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"ferryman_unmigrated_{os.getpid()}"
    with databases.scratch(pg_admin_url, name, migrated=False) as url:
        with connect.connect(url) as conn:
            conn.execute((APP / "schema.sql").read_text())  # type: ignore[arg-type]
        code = cli.main(["mapping", "check", str(APP / "mapping.yaml"), "--database", url, *SALES])
    assert (code, capsys.readouterr().out) == (
        1,
        "this database has no ferryman tables (the ledger a mapping writes through): run"
        " `ferryman db migrate` against it first\n",
    )


def test_an_invalid_mapping_file_is_refused_naming_the_field(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("provider: crm\nkinds:\n  people:\n    table: t\n    columns: {a: {}}\n")
    assert cli.main(["mapping", "check", str(path), "--database", "postgresql:///x"]) == 2
    assert "kinds.people.columns.a: give exactly one of field" in capsys.readouterr().err


def test_sample_shows_the_rows_it_would_write_and_writes_nothing(
    app_url: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = {
        "organizations": [{"id": 1, "name": "One", "domain": "one.example", "employees": 3}],
        "people": [
            {"id": 5, "organizationId": 1, "first_name": "Ann", "last_name": "Lee",
             "email": "ANN@one.example"},
            {"id": 6, "organizationId": 9, "first_name": "Bob", "last_name": "Ray",
             "email": "bob@nine.example"},
        ],
    }  # fmt: skip
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records))
    argv = ["mapping", "sample", str(APP / "mapping.yaml"), "--database", app_url, *SALES]
    assert cli.main([*argv, "--records", str(path), "--workspace", "acme"]) == 0
    out = capsys.readouterr().out
    assert "organizations -> sales.companies" in out
    assert "refused 6: references organizations 9, which is not imported" in out
    contact = next(line for line in out.splitlines() if "ann@one.example" in line)
    company = next(line for line in out.splitlines() if "one.example" in line and "One" in line)
    company_id = company.split()[1]
    assert contact.split()[:4] == ["5", contact.split()[1], "acme", company_id]  # resolved
    assert out.rstrip().endswith("(rolled back: nothing was written)")
    with connect.connect(app_url) as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM sales.companies) + (SELECT count(*) FROM"
            " sales.contacts) + (SELECT count(*) FROM ferryman_ledger) AS n"
        ).fetchone()
    assert counts is not None and counts["n"] == 0


def test_schema_prints_the_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["mapping", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "ferryman mapping"
    assert "KindMapping" in schema["$defs"]
