"""Tenancy at the destination, attacked: a team (namespace ``intruder``) with nothing but its own
MigrationMappings, its own Secret and its own source (a real HTTP server answering what it
likes) tries to write another team's rows, ferryman's own tables, or SQL of its own, on a real
PostgreSQL; each run is admitted through the operator's admission path
(``ferryman_worker.contract.admit`` with a sealed credential and a namespace) and worked by a
real ``ferryman worker`` process. What admission refuses never reaches the worker; what a
stored snapshot says is checked again by the worker's writer."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from cryptography.fernet import Fernet
from listener import Listener, listening
from migration import wait_finished
from psycopg.types.json import Jsonb
from workers import Subprocess, scalar

from ferryman_worker import contract
from ferryman_worker.db import connect
from ferryman_worker.destinations import catalog
from ferryman_worker.destinations.mapping import parse
from ferryman_worker.engine.credentials import Credential

VICTIM, INTRUDER = "victim", "intruder"
"""Each team's namespace, and the workspace it owns."""
PLANTED = {"id": 1, "name": "planted", "domain": "pwned.example"}
APP_USERS = """
CREATE TABLE app_users (
    id        bigserial PRIMARY KEY,
    workspace text NOT NULL,
    email     text NOT NULL UNIQUE,          -- an address is one account, whatever the workspace
    name      text NOT NULL
);
CREATE TABLE app_contacts (
    id        bigserial PRIMARY KEY,
    workspace text NOT NULL,
    email     text NOT NULL,
    name      text NOT NULL,
    UNIQUE (workspace, email)
);
INSERT INTO app_users (workspace, email, name) VALUES ('victim', 'boss@victim.example', 'Boss');
INSERT INTO app_contacts (workspace, email, name) VALUES ('victim', 'boss@victim.example', 'Boss');
"""
"""The application's tables, shared by every workspace, and a row of the victim's in each (the
application's own: it inserts them)."""


def _records(*records: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    return 200, {"Content-Type": "application/json"}, json.dumps({"data": list(records)}).encode()


@pytest.fixture
def key_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "sealing-key"
    path.write_bytes(Fernet.generate_key())
    return path


@pytest.fixture
def source() -> Iterator[Listener]:
    """The intruder's own source: every listing answers one record, on one page."""
    with listening({"/v1/organizations": _records(PLANTED)}) as server:
        yield server


@pytest.fixture
def app(db_url: str) -> str:
    with connect.connect(db_url) as conn:
        conn.execute(APP_USERS)  # type: ignore[arg-type]
    return db_url


def _kind(table: str, columns: dict[str, Any], **more: Any) -> dict[str, Any]:
    """A kind's mapping whose workspace column is ``workspace``."""
    return {"table": table, "workspaceColumn": "workspace", "columns": columns, **more}


def _organizations(**columns: Any) -> dict[str, Any]:
    return {
        "provider": "democrm",
        "kinds": {
            "organizations": _kind(
                "crm_organizations",
                {
                    "workspace": {"constant": "workspace"},
                    "source_id": {"field": "/id"},
                    "name": {"field": "/name"},
                    "domain": {"field": "/domain"},
                    **columns,
                },
            )
        },
    }


def _admit(
    db_url: str,
    key_file: pathlib.Path,
    source: Listener,
    namespace: str,
    mapping: dict[str, Any] | None,
    *,
    name: str = "run-1",
    kinds: tuple[str, ...] = ("organizations",),
    **spec: Any,
) -> int:
    """Admit a MigrationRun of ``namespace`` (workspace: the namespace's name) as the operator
    does: its mapping read from a MigrationMapping, its credential sealed and bound to the
    source."""
    run = contract.MigrationRun.model_validate(
        {
            "apiVersion": "ferryman.dev/v1alpha1",
            "kind": "MigrationRun",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "workspace": namespace,
                "source": {
                    "provider": "democrm",
                    "baseURL": source.url,
                    "credentialsSecretRef": {"name": "crm", "key": "token"},
                },
                "kinds": list(kinds),
                "options": {"stripes": 1},
                **({"mapping": {"name": "m"}} if mapping is not None else {}),
                **spec,
            },
        }
    )
    hosts = (f"http://127.0.0.1:{source.port}",)
    sealed = contract.Sealed(
        hosts, contract.Sealer(key_file.read_bytes()).seal(Credential({"token": "t"}, hosts))
    )
    document = None if mapping is None else contract.mapping_document(mapping, "MigrationMapping m")
    with connect.connect(db_url) as conn:
        return contract.admit(conn, run, 2, mapping=document, sealed=sealed)


def _refusal(db_url: str, key_file: pathlib.Path, source: Listener, mapping: Any) -> str | None:
    """Why admission refused the intruder's run of ``mapping``; None when it admitted it, and
    then a real worker has taken it to its end."""
    try:
        run_id = _admit(db_url, key_file, source, INTRUDER, mapping)
    except contract.ConfigurationError as exc:
        return str(exc)
    _work(db_url, key_file, run_id)
    return None


def _work(db_url: str, key_file: pathlib.Path, run_id: int) -> dict[str, Any]:
    """Run a real ``ferryman worker`` until the run ends; the run's final state."""
    worker = Subprocess(db_url, "migrations:2", {"FERRYMAN_SEALING_KEY_FILE": str(key_file)})
    try:
        return wait_finished(db_url, run_id, timeout=90)
    finally:
        worker.stop()


def _forge(db_url: str, run_id: int, path: list[str], value: Any) -> None:
    """Rewrite the run's stored snapshot at ``path``, as a write reaching ferryman's tables
    would (a mapping into ``ferryman_runs`` did, before those were refused: forged here, since
    no path ferryman offers writes a stored snapshot now). The database refuses it too
    (``ferryman_runs_as_admitted``), so the forgery, as a superuser, skips triggers."""
    with connect.connect(db_url) as conn, conn.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute(
            "UPDATE ferryman_runs SET mapping = jsonb_set(mapping, %s, %s) WHERE id = %s",
            (path, Jsonb(value), run_id),
        )


def _victims_organizations(db_url: str) -> int:
    return int(scalar(db_url, "SELECT count(*) FROM crm_organizations WHERE workspace = 'victim'"))


@pytest.mark.parametrize("declared", [True, False], ids=["workspace-column", "undeclared"])
def test_a_mapping_cannot_plant_rows_in_another_workspace_with_a_fixed_value(
    db_url: str, key_file: pathlib.Path, source: Listener, declared: bool
) -> None:
    mapping = _organizations(workspace={"value": VICTIM})
    if not declared:
        mapping["kinds"]["organizations"].pop("workspaceColumn", None)
    refusal = _refusal(db_url, key_file, source, mapping)
    assert _victims_organizations(db_url) == 0
    assert refusal is not None
    if declared:
        assert "kinds.organizations: columns.workspace: the workspace column is mapped" in refusal
        assert "map it as workspace: {constant: workspace}" in refusal
    else:
        assert "kinds.organizations.workspaceColumn: public.crm_organizations is written" in refusal
    assert scalar(db_url, "SELECT count(*) FROM ferryman_runs") == 0


def test_a_mapping_cannot_rewrite_another_teams_run_row(
    db_url: str, key_file: pathlib.Path, source: Listener
) -> None:
    victims = _admit(db_url, key_file, source, VICTIM, None, suspend=True)
    victim_name = scalar(db_url, "SELECT name FROM ferryman_runs WHERE id = %s", (victims,))
    source.answers["/v1/organizations"] = _records(
        {"id": 1, "name": victim_name, "domain": "http://pwned.example"}
    )
    fixed = {
        "provider": {"value": "democrm"},
        "credential": {"value": '{"name": "crm", "key": "token"}'},
        "kinds": {"value": "{organizations}"},
        "phases": {"value": '[["organizations"]]'},
        "options": {"value": "{}"},
    }
    into_runs = {
        "provider": "democrm",
        "kinds": {
            "organizations": {
                "table": "ferryman_runs",
                "naturalKey": {"columns": ["name"], "onExisting": "update"},
                "columns": {
                    "name": {"field": "/name"},
                    "workspace": {"value": VICTIM},
                    "base_url": {"field": "/domain"},
                    **fixed,
                },
            }
        },
    }
    refusal = _refusal(db_url, key_file, source, into_runs)
    row = scalar(db_url, "SELECT base_url FROM ferryman_runs WHERE id = %s", (victims,))
    assert row == source.url
    assert refusal is not None
    assert "kinds.organizations.table: public.ferryman_runs is one of ferryman's own" in refusal


def test_a_natural_key_never_matches_another_workspaces_row(
    app: str, key_file: pathlib.Path, source: Listener
) -> None:
    source.answers["/v1/people"] = _records(
        {"id": 1, "name": "pwned", "email": "boss@victim.example"}
    )
    people = {
        "provider": "democrm",
        "kinds": {
            "people": _kind(
                "app_users",
                {
                    "workspace": {"constant": "workspace"},
                    "email": {"field": "/email"},
                    "name": {"field": "/name"},
                },
                naturalKey={"columns": ["email"], "onExisting": "update"},
            )
        },
    }
    try:
        run_id = _admit(app, key_file, source, INTRUDER, people, kinds=("people",))
    except contract.MappingInvalid as exc:
        refusal: str | None = str(exc)
    else:
        refusal = None
        _work(app, key_file, run_id)
    victims = "SELECT workspace || ': ' || name FROM app_users WHERE email = 'boss@victim.example'"
    assert scalar(app, victims) == "victim: Boss"
    assert refusal is not None
    assert "kinds.people: naturalKey.columns: a key without the workspace column workspace" in (
        refusal
    )


def test_a_delta_deletes_no_row_of_another_workspace(
    app: str, key_file: pathlib.Path, source: Listener
) -> None:
    source.answers["/v1/people"] = _records(
        {"id": 1, "name": "Mine", "email": "me@intruder.example"}
    )
    people = {
        "provider": "democrm",
        "kinds": {
            "people": _kind(
                "app_contacts",
                {
                    "workspace": {"constant": "workspace"},
                    "email": {"field": "/email"},
                    "name": {"field": "/name"},
                },
                onDeleted="delete",
            )
        },
    }
    full = _admit(app, key_file, source, INTRUDER, people, kinds=("people",))
    assert _work(app, key_file, full)["state"] == "succeeded"
    victims = scalar(app, "SELECT id FROM app_contacts WHERE workspace = 'victim'")
    with connect.connect(app) as conn:
        # The intruder's ledger slot naming the victim's row, as a natural-key match across
        # workspaces wrote it before matches were held to the run's workspace: no event
        # ferryman offers writes such a slot now.
        conn.execute(
            "UPDATE ferryman_ledger SET row_id = %s WHERE workspace = 'intruder'", (victims,)
        )
    source.answers["/v1/people"] = _records({"id": 1, "name": "Mine", "deleted": True})
    delta = _admit(
        app, key_file, source, INTRUDER, people, name="run-2", kinds=("people",), mode="Delta"
    )
    final = _work(app, key_file, delta)
    assert scalar(app, "SELECT name FROM app_contacts WHERE id = %s", (victims,)) == "Boss"
    assert final["state"] == "succeeded"


def test_a_runs_admitted_definition_cannot_be_rewritten_in_the_database(
    db_url: str, key_file: pathlib.Path, source: Listener
) -> None:
    """Whatever reaches ``ferryman_runs`` (a write path into ferryman's tables, a role that may
    update it), the definition a worker reads back is what admission checked."""
    victims = _admit(db_url, key_file, source, VICTIM, None, suspend=True)
    rewrites = {
        "base_url": "'http://pwned.example'",
        "workspace": "'intruder'",
        "mapping": "'{}'::jsonb",
        "credential": '\'{"name": "theirs"}\'::jsonb',
    }
    for column, value in rewrites.items():
        with connect.connect(db_url) as conn, pytest.raises(psycopg.errors.IntegrityError) as no:
            conn.execute(
                f"UPDATE ferryman_runs SET {column} = {value} WHERE id = %s",  # type: ignore[arg-type]
                (victims,),
            )
        assert f"run {VICTIM}/run-1 is as it was admitted" in str(no.value)
    with connect.connect(db_url) as conn:
        assert contract.cancel(conn, f"{VICTIM}/run-1")  # ferryman's own updates still work
    assert scalar(db_url, "SELECT base_url FROM ferryman_runs WHERE id = %s", (victims,)) == (
        source.url
    )


def test_a_stored_column_type_never_runs_as_sql(
    db_url: str, key_file: pathlib.Path, source: Listener
) -> None:
    victims = _admit(db_url, key_file, source, VICTIM, None, suspend=True)
    mine = _admit(db_url, key_file, source, INTRUDER, _organizations(), suspend=True)
    statement = (
        "text, id bigint, updated_at timestamptz)), pwned AS (UPDATE ferryman_runs SET base_url = 'http://pwned'"
        " WHERE workspace = 'victim' RETURNING 1), filler AS (SELECT * FROM"
        " jsonb_to_record('{}') AS r(x text"
    )
    _forge(db_url, mine, ["catalog", "organizations", "types", "name"], statement)
    with connect.connect(db_url) as conn:
        contract.resume(conn, f"{INTRUDER}/run-1")
    final = _work(db_url, key_file, mine)
    assert scalar(db_url, "SELECT base_url FROM ferryman_runs WHERE id = %s", (victims,)) == (
        source.url
    )
    assert final["state"] == "failed"
    assert "stored catalog is not valid" in final["error"]
    assert "types.name" in final["error"] and "UPDATE" not in final["error"]


def test_a_stored_snapshot_writes_only_where_the_workers_installation_allows(
    db_url: str, key_file: pathlib.Path, source: Listener
) -> None:
    mine = _admit(db_url, key_file, source, INTRUDER, _organizations(), suspend=True)
    with connect.connect(db_url) as conn:
        conn.execute("CREATE SCHEMA other")
        conn.execute("CREATE TABLE other.crm_organizations (LIKE crm_organizations INCLUDING ALL)")
    _forge(db_url, mine, ["mapping", "kinds", "organizations", "table"], "other.crm_organizations")
    _forge(db_url, mine, ["catalog", "organizations", "table"], "other.crm_organizations")
    with connect.connect(db_url) as conn:
        contract.resume(conn, f"{INTRUDER}/run-1")
    final = _work(db_url, key_file, mine)
    assert scalar(db_url, "SELECT count(*) FROM other.crm_organizations") == 0
    assert final["state"] == "failed"
    assert (
        "other.crm_organizations is not a table this installation lets mappings write"
        in (final["error"])
    )


def test_a_stored_snapshot_writes_only_its_runs_workspace(
    db_url: str, key_file: pathlib.Path, source: Listener
) -> None:
    mine = _admit(db_url, key_file, source, INTRUDER, _organizations(), suspend=True)
    path = ["mapping", "kinds", "organizations", "columns", "workspace"]
    _forge(db_url, mine, path, {"value": VICTIM})
    with connect.connect(db_url) as conn:
        contract.resume(conn, f"{INTRUDER}/run-1")
    final = _work(db_url, key_file, mine)
    assert _victims_organizations(db_url) == 0
    assert final["state"] == "failed"
    assert "the run's stored mapping: not a valid mapping" in final["error"]
    assert "columns.workspace: the workspace column is mapped to something else" in final["error"]


def test_a_join_table_is_held_to_the_installations_destinations(db_url: str) -> None:
    """A many-to-many mapping's join table is a destination too: never ferryman's, never a
    schema the installation does not allow."""
    deals = _kind(
        "crm_deals",
        {"workspace": {"constant": "workspace"}, "source_id": {"field": "/id"},
         "title": {"field": "/title"}},
        joins=[{"table": "ferryman_ledger", "column": "row_id", "otherColumn": "run_id",
                "kind": "people", "field": "/person_ids"}],
    )  # fmt: skip
    people = _kind(
        "crm_people",
        {"workspace": {"constant": "workspace"}, "source_id": {"field": "/id"},
         "name": {"field": "/n"}},
    )  # fmt: skip
    mapping = parse({"provider": "democrm", "kinds": {"deals": deals, "people": people}})
    with connect.connect(db_url) as conn:
        problems = catalog.check(conn, mapping).problems
        conn.execute("CREATE SCHEMA other; CREATE TABLE other.links (a bigint, b bigint)")
        deals["joins"][0].update(table="other.links", column="a", otherColumn="b")
        document = {"provider": "democrm", "kinds": {"deals": deals, "people": people}}
        elsewhere = catalog.check(conn, parse(document))
    assert any(
        p.startswith("kinds.deals.joins[0].table: public.ferryman_ledger is one of ferryman's own")
        for p in problems
    ), problems
    assert any(
        p.startswith("kinds.deals.joins[0].table: other.links is not a table this installation")
        for p in elsewhere.problems
    ), elsewhere.problems
