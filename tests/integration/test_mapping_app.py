"""A mapping into a real application schema (examples/apps/sales: foreign keys, unique natural
keys, identity and serial ids, a check, triggers): the catalog checks, references, natural keys
with each onExisting policy, rows the database refuses recorded with its reason and nothing else
lost, and the landing table for a kind without a mapping."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import yaml
from migration import request
from psycopg.rows import tuple_row
from pydantic import BaseModel, ConfigDict
from stub_provider import StubProvider

from ferryman_worker import destinations
from ferryman_worker.db import connect
from ferryman_worker.destination_policy import Policy as DestinationPolicy
from ferryman_worker.destinations import catalog
from ferryman_worker.destinations.mapping import Mapping, parse
from ferryman_worker.engine import runs, windows
from ferryman_worker.providers import Kind

APP = pathlib.Path(__file__).resolve().parents[2] / "examples" / "apps" / "sales"
SALES = DestinationPolicy(schemas=("sales",))
"""The example application's tables are in its schema, which the installation allows."""
JOB = 11


class Record(BaseModel):
    """Any record with an integer id: the test is about the writers, not the records."""

    model_config = ConfigDict(extra="allow")
    id: int


class NoWriters(StubProvider):
    """A provider that names no SQL writer function."""

    name = "crm"


def _document() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((APP / "mapping.yaml").read_text())
    return document


@pytest.fixture
def app(conn: connect.Connection) -> connect.Connection:
    conn.execute((APP / "schema.sql").read_text())  # type: ignore[arg-type]
    return conn


class Import:
    """Windows of one run written as the engine writes them: one statement, or, if the database
    refuses it, carefully, row by row."""

    def __init__(self, conn: connect.Connection, mapping: Mapping) -> None:
        self.conn = conn
        self.snapshot = destinations.snapshot(conn, mapping, list(mapping.kinds), SALES)
        self.run_id = int(runs.admit(conn, request("http://127.0.0.1:1"))["id"])

    def write(self, kind: str, records: list[dict[str, Any]]) -> windows.Counts:
        task = self.conn.execute(
            "INSERT INTO ferryman_tasks (run_id, phase, kind, cursor_key, cursor, status, job_id)"
            " VALUES (%s, 0, %s, %s, '{}', 'running', %s) RETURNING id",
            (self.run_id, kind, f"k{len(records)}{records[0]['id']}", JOB),
        ).fetchone()
        assert task is not None
        writer = destinations.writer_for({"mapping": self.snapshot}, NoWriters(), kind, SALES)
        target = windows.Target(
            self.run_id, int(task["id"]), JOB, "acme", Kind(kind, Record), writer
        )
        valid, malformed = windows.validate(target.kind, records)
        window = windows.Window(len(records), valid, malformed)
        cur = self.conn.cursor(row_factory=tuple_row)
        try:
            return windows.write(cur, target, window)
        except windows.REFUSED:
            with self.conn.transaction():
                return windows.write_carefully(cur, target, window)

    def errors(self) -> dict[tuple[str, str], str]:
        rows = self.conn.execute(
            "SELECT kind, source_id, reason FROM ferryman_row_errors WHERE run_id = %s",
            (self.run_id,),
        ).fetchall()
        return {(r["kind"], r["source_id"]): r["reason"] for r in rows}

    def ledger(self, kind: str) -> dict[str, int]:
        rows = self.conn.execute(
            "SELECT source_id, row_id FROM ferryman_ledger WHERE kind = %s", (kind,)
        ).fetchall()
        return {r["source_id"]: r["row_id"] for r in rows}


def test_the_example_mapping_fits_the_example_schema(app: connect.Connection) -> None:
    report = catalog.check(app, parse(_document()), allowed=SALES)
    assert report.problems == []
    assert report.catalogs["organizations"].always  # an identity column GENERATED ALWAYS
    assert report.catalogs["deals"].types["amount"] == "numeric(12,2)"


def test_every_problem_of_a_mapping_is_one_line_naming_its_field(app: connect.Connection) -> None:
    document = _document()
    kinds = document["kinds"]
    kinds["organizations"]["table"] = "sales.firms"
    kinds["people"]["columns"]["nickname"] = {"field": "/nick"}
    kinds["people"]["naturalKey"] = {"columns": ["workspace", "last_name"]}
    kinds["deals"]["columns"]["created_at"]["cast"] = "timestampish"
    del kinds["deals"]["columns"]["title"]
    kinds["notes"]["columns"]["created_at"]["cast"] = "integer"
    app.execute(
        "CREATE TABLE sales.tags"
        " (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), workspace text, t text)"
    )
    kinds["tags"] = {
        "table": "sales.tags",
        "workspaceColumn": "workspace",
        "columns": {"workspace": {"constant": "workspace"}, "t": {"field": "/t"}},
    }
    problems = catalog.check(app, parse(document), allowed=SALES).problems
    assert problems == [
        "kinds.organizations.table: there is no table sales.firms in this database; ferryman"
        " never creates application tables: create it with the application's own migrations",
        "kinds.people.columns.nickname: sales.contacts has no column nickname; known: "
        "['company_id', 'email', 'first_name', 'id', 'imported_by_run', 'job_title', "
        "'last_name', 'workspace']",
        "kinds.people.naturalKey.columns: sales.contacts has no unique index on exactly "
        "(workspace, last_name): create one (CREATE UNIQUE INDEX ON sales.contacts (workspace,"
        " last_name)) or change the key",
        "kinds.deals.columns.created_at.cast: there is no type 'timestampish' in this database",
        "kinds.deals.columns: sales.deals.title is NOT NULL and has no default: map it",
        "kinds.tags.id: sales.tags.id is uuid, and the ledger holds integer destination ids "
        "(bigint): name an integer key",
        'kinds.notes: PostgreSQL refuses its writer: column "created_at" is of type timestamp'
        " with time zone but expression is of type integer",
    ]


def test_on_deleted_is_checked_against_the_catalog(app: connect.Connection) -> None:
    """A soft delete's columns exist and take its values; delete needs nothing more."""
    document = _document()
    kinds = document["kinds"]
    kinds["organizations"]["onDeleted"] = "delete"
    kinds["deals"]["onDeleted"] = {"set": {"archived": {"value": True}}}
    kinds["notes"]["onDeleted"] = {"set": {"created_at": {"value": "soon"}}}
    problems = catalog.check(app, parse(document), allowed=SALES).problems
    assert problems == [
        "kinds.deals.onDeleted.set.archived: sales.deals has no column archived; add it with"
        " the application's own migrations, or set another; known: ['amount', 'contact_id',"
        " 'created_at', 'id', 'stage', 'title', 'updated_at', 'workspace']",
        "kinds.notes: PostgreSQL refuses its writer: onDeleted: invalid input syntax for type"
        ' timestamp with time zone: "soon"',
    ]
    app.execute("ALTER TABLE sales.deals ADD COLUMN archived boolean NOT NULL DEFAULT false")
    kinds["notes"]["onDeleted"] = {"set": {"created_at": {"constant": "now"}}}
    report = catalog.check(app, parse(document), allowed=SALES)
    assert report.problems == []
    assert report.catalogs["deals"].types["archived"] == "boolean"


def test_references_natural_keys_and_refusals(app: connect.Connection) -> None:
    existing_company = app.execute(
        "INSERT INTO sales.companies (workspace, name, domain) VALUES"
        " ('acme', 'Old name', 'org1.example.com') RETURNING id"
    ).fetchone()["id"]
    existing_contact = app.execute(
        "INSERT INTO sales.contacts (workspace, company_id, first_name, last_name, email,"
        " job_title) VALUES ('acme', %s, 'Ann', 'Lee', 'person1@org1.example.com', 'Kept')"
        " RETURNING id",
        (existing_company,),
    ).fetchone()["id"]
    run = Import(app, parse(_document()))

    orgs = run.write(
        "organizations",
        [
            {"id": 1, "name": "New name", "domain": "org1.example.com", "employees": 10},
            {"id": 2, "name": "Two", "domain": "org2.example.com", "employees": 20},
        ],
    )
    people = run.write(
        "people",
        [
            {"id": 1, "organizationId": 1, "first_name": "A", "last_name": "L",
             "email": "person1@org1.example.com", "title": "Replaced?"},
            {"id": 2, "organizationId": 99, "first_name": "B", "last_name": "M",
             "email": "person2@org99.example.com"},
            {"id": 3, "organizationId": 2, "first_name": "C", "last_name": "N",
             "email": "Person3@ORG2.example.com"},
        ],
    )  # fmt: skip
    deals = run.write(
        "deals",
        [
            {"id": 1, "personId": 1, "title": "Big", "amount": 1000, "watcherIds": [1, 3, 42]},
            {"id": 2, "personId": 3, "title": "Negative", "amount": -5},
            {"id": 3, "personId": 2, "title": "Orphan", "stage": None},
        ],
    )
    notes = run.write(
        "notes",
        [
            {"id": 1, "dealId": 1, "body": "call back"},
            {"id": 2, "dealId": 1, "body": "   "},
            {"id": 3, "dealId": 2, "body": "on a refused deal"},
        ],
    )

    # the existing company and contact are matched by their natural keys, not written
    assert [(c.written, c.matched, c.failed) for c in (orgs, people, deals, notes)] == [
        (1, 1, 0), (1, 1, 1), (2, 0, 1), (1, 0, 2),
    ]  # fmt: skip
    tasks = app.execute(
        "SELECT kind, rows_written, rows_matched FROM ferryman_tasks WHERE run_id = %s ORDER BY id",
        (run.run_id,),
    ).fetchall()
    assert [(t["kind"], t["rows_written"], t["rows_matched"]) for t in tasks] == [
        ("organizations", 1, 1), ("people", 1, 1), ("deals", 2, 0), ("notes", 1, 0),
    ]  # fmt: skip
    errors = run.errors()
    assert errors[("people", "2")].endswith("references organizations 99, which is not imported")
    assert 'violates check constraint "deals_amount_check"' in errors[("deals", "2")]
    assert errors[("notes", "2")].endswith("a note needs a body")
    assert errors[("notes", "3")].endswith("references deals 2, which is not imported")
    assert len(errors) == 4

    companies = run.ledger("organizations")
    assert companies["1"] == existing_company  # matched, and updated
    company = app.execute("SELECT * FROM sales.companies WHERE id = %s", (existing_company,))
    assert company.fetchone()["name"] == "New name"
    contacts = run.ledger("people")
    assert contacts["1"] == existing_contact  # matched, and skipped
    kept = app.execute("SELECT job_title FROM sales.contacts WHERE id = %s", (existing_contact,))
    assert kept.fetchone()["job_title"] == "Kept"
    new = app.execute(
        "SELECT company_id, email, imported_by_run FROM sales.contacts WHERE id = %s",
        (contacts["3"],),
    ).fetchone()
    assert new == {
        "company_id": companies["2"],
        "email": "person3@org2.example.com",
        "imported_by_run": run.run_id,
    }
    deal_rows = app.execute(
        "SELECT id, contact_id, amount, stage FROM sales.deals ORDER BY id"
    ).fetchall()
    ledger_deals = run.ledger("deals")
    assert deal_rows == [
        {"id": ledger_deals["1"], "contact_id": existing_contact, "amount": 1000, "stage": "lead"},
        {"id": ledger_deals["3"], "contact_id": None, "amount": 0, "stage": "lead"},
    ]
    watchers = app.execute("SELECT deal_id, contact_id FROM sales.deal_watchers ORDER BY 2")
    assert [tuple(r.values()) for r in watchers.fetchall()] == [
        (ledger_deals["1"], existing_contact),
        (ledger_deals["1"], contacts["3"]),
    ]
    assert app.execute("SELECT count(*) AS n FROM sales.notes").fetchone()["n"] == 1


def test_on_existing_fail_refuses_the_match_with_the_databases_reason(
    app: connect.Connection,
) -> None:
    app.execute(
        "INSERT INTO sales.companies (workspace, name, domain) VALUES ('acme', 'A', 'a.example')"
    )
    document = _document()
    document["kinds"]["organizations"]["naturalKey"]["onExisting"] = "fail"
    run = Import(app, parse(document))
    counts = run.write(
        "organizations",
        [
            {"id": 1, "name": "A again", "domain": "a.example"},
            {"id": 2, "name": "B", "domain": "b.example"},
        ],
    )
    assert (counts.written, counts.failed) == (1, 1)
    assert "companies_workspace_domain_key" in run.errors()[("organizations", "1")]
    names = app.execute("SELECT name FROM sales.companies ORDER BY name").fetchall()
    assert [r["name"] for r in names] == ["A", "B"]


def test_a_kind_without_a_mapping_lands_as_jsonb(app: connect.Connection) -> None:
    document = _document()
    run = Import(app, parse(document))
    counts = run.write("invoices", [{"id": 7, "total": 12.5}, {"id": 8, "lines": [1, 2]}])
    assert counts.written == 2
    landed = app.execute(
        "SELECT l.source_id, l.record, l.run_id, g.row_id = l.id AS slot FROM ferryman_landing l"
        " JOIN ferryman_ledger g ON g.kind = l.kind AND g.source_id = l.source_id ORDER BY 1"
    ).fetchall()
    assert landed == [
        {"source_id": "7", "record": {"id": 7, "total": 12.5}, "run_id": run.run_id, "slot": 1},
        {"source_id": "8", "record": {"id": 8, "lines": [1, 2]}, "run_id": run.run_id, "slot": 1},
    ]


def test_a_trigger_may_rewrite_the_column_that_keeps_the_source_id(
    app: connect.Connection,
) -> None:
    """Each slot names its record's own row and keeps its version, whatever the application's
    BEFORE trigger does to the row's columns (here, the one filled from the source id)."""
    app.execute(
        "CREATE TABLE sales.leads (id bigserial PRIMARY KEY, workspace text NOT NULL,"
        " source_id text NOT NULL, name text);"
        " CREATE FUNCTION sales.prefix_lead() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN NEW.source_id := 'lead-' || NEW.source_id; RETURN NEW; END $$;"
        " CREATE TRIGGER leads_prefixed BEFORE INSERT ON sales.leads"
        " FOR EACH ROW EXECUTE FUNCTION sales.prefix_lead()"
    )
    columns = {"workspace": {"constant": "workspace"}, "source_id": {"field": "/id"}}
    mapping = parse(
        {
            "provider": "crm",
            "kinds": {
                "leads": {
                    "table": "sales.leads",
                    "workspaceColumn": "workspace",
                    "columns": {**columns, "name": {"field": "/name"}},
                }
            },
        }
    )
    run = Import(app, mapping)
    assert run.write("leads", [{"id": 7, "name": "Seven"}, {"id": 8, "name": "Eight"}]).written == 2
    rows = app.execute(
        "SELECT l.source_id, t.source_id AS stored, t.name, l.source_version"
        " FROM ferryman_ledger l JOIN sales.leads t ON t.id = l.row_id"
        " WHERE l.kind = 'leads' ORDER BY l.source_id"
    ).fetchall()
    assert [(r["source_id"], r["stored"], r["name"]) for r in rows] == [
        ("7", "lead-7", "Seven"),
        ("8", "lead-8", "Eight"),
    ]
    assert all(r["source_version"].startswith("h:") for r in rows)
    assert rows[0]["source_version"] != rows[1]["source_version"]
