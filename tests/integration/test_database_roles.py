"""The separate database roles of docs/security.md, created with the SQL as written there, on a
real PostgreSQL whose schema the first install migrated, run as that install's role (the
database's owner, no superuser): each component runs under its own role.
The migrator's role owns the schema and applies a later migration; the operator's role admits,
suspends, resumes, reads and cancels runs through ``ferryman_worker.contract`` but cannot write a
destination table; a real ``ferryman worker`` process and ``ferryman reap`` under the workers'
role take demo CRM runs (the shipped mapping's generated writers, and the provider's SQL
functions) to Succeeded with every row once, and cannot change the schema."""

from __future__ import annotations

import datetime
import os
import pathlib
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, LiteralString

import psycopg
import pytest
from cryptography.fernet import Fernet
from migration import SECRET, TABLES, check_against_truth, request, wait_finished
from psycopg import sql
from tests.democrm.server_fixture import DemoCRM
from workers import SUPPORT, Subprocess

from ferryman_worker import contract
from ferryman_worker.db import connect, databases, migrate
from ferryman_worker.engine import runs

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "security.md"
ROLES = ("ferryman_operator", "ferryman_worker", "ferryman_owner")
INSTALLER = "ferryman_install"
"""The role the first install ran as: the database's owner, no superuser."""
PLUGIN = {"fakecrm": "ferryman_fakeplugin.migrations"}
"""A later migration, as a release (or a plug-in) brings it: a table, a function, an ALTER."""
ALTER_EACH: LiteralString = """
DO $$
DECLARE statement text;
BEGIN
    FOR statement IN
        SELECT format('ALTER TABLE %s ADD COLUMN ferryman_probe integer', oid::regclass)
          FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')
        UNION ALL
        SELECT format('ALTER FUNCTION %s SET work_mem = ''8MB''', oid::regprocedure)
          FROM pg_proc WHERE pronamespace = 'public'::regnamespace
    LOOP
        EXECUTE statement;
    END LOOP;
END $$"""
"""What a later migration may do to each table and function the first install created."""
UNALTERED: LiteralString = """
SELECT count(*) AS tables FROM pg_class c
 WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')
   AND NOT EXISTS (SELECT 1 FROM pg_attribute a
                    WHERE a.attrelid = c.oid AND a.attname = 'ferryman_probe')"""
DATA: dict[str, Any] = {"organizations": 120, "people": 80, "deals": 12, "messages_per_deal": 2}


def _roles_sql() -> str:
    text = DOC.read_text()
    section = text[text.index("## Separate database roles") :]
    [block] = re.findall(r"```sql\n(.*?)```", section, re.S)
    return str(block)


def _url(db_url: str, role: str) -> str:
    return psycopg.conninfo.make_conninfo(db_url, user=role)


def _as(db_url: str, role: str) -> psycopg.Connection[dict[str, object]]:
    return connect.connect(_url(db_url, role))


@pytest.fixture
def roles(pg_admin_url: str) -> Iterator[str]:
    """A database the first install migrated as its owner, a role that is no superuser (as on a
    managed PostgreSQL), which then ran the doc's SQL; yields that role's URL."""
    name = f"ferryman_roles_{os.getpid()}"
    _drop(pg_admin_url, name)
    with connect.connect(pg_admin_url) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN CREATEROLE").format(sql.Identifier(INSTALLER)))
    url = _url(databases.create(pg_admin_url, name), INSTALLER)
    try:
        with connect.connect(pg_admin_url) as admin:
            owner = sql.SQL("ALTER DATABASE {} OWNER TO {}")
            admin.execute(owner.format(sql.Identifier(name), sql.Identifier(INSTALLER)))
        with connect.connect(url) as install:
            migrate.migrate(install)
            install.execute(_roles_sql())
        yield url
    finally:
        _drop(pg_admin_url, name)


def _drop(admin_url: str, database: str) -> None:
    databases.drop(admin_url, database)
    with connect.connect(admin_url) as admin:
        for role in (*ROLES, INSTALLER):
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_the_documented_roles_grant_what_each_component_needs_and_no_more(roles: str) -> None:
    with _as(roles, "ferryman_operator") as operator:
        run = runs.admit(operator, request("http://127.0.0.1:1", kinds=["organizations"]))
        runs.start(operator, run)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            operator.execute(
                "INSERT INTO crm_organizations (workspace, source_id, name) VALUES ('acme', 1, 'x')"
            )
    with _as(roles, "ferryman_worker") as worker:
        worker.execute(
            "INSERT INTO crm_organizations (workspace, source_id, name) VALUES ('acme', 1, 'x')"
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            worker.execute("CREATE TABLE intruding (id int)")


def test_the_owner_owns_what_the_first_install_created_and_applies_a_later_migration(
    roles: str,
) -> None:
    with _as(roles, "ferryman_owner") as owner:
        with owner.transaction(force_rollback=True):
            owner.execute(ALTER_EACH)
            unaltered = owner.execute(UNALTERED).fetchone()
            assert unaltered == {"tables": 0}
        assert [m.label for m in migrate.migrate(owner, PLUGIN)] == [
            "fakecrm/0001_widgets",
            "fakecrm/0002_colour",
        ]
    done = _ferryman(_url(roles, "ferryman_owner"), "db", "migrate")
    assert done.returncode == 0 and "0 migration(s) applied" in done.stdout, done.stderr
    with _as(roles, "ferryman_worker") as worker:  # the later migration's table, for the workers
        worker.execute("INSERT INTO fake_widgets (workspace, source_id, name) VALUES ('a', 1, 'w')")
        worker.execute("SELECT fake_write_widgets('[]', 'a', 'widgets', 1)")
        migrate.check_current(worker, PLUGIN)
    with _as(roles, "ferryman_operator") as operator:  # it reads everything
        assert operator.execute("SELECT count(*) AS n FROM fake_widgets").fetchone() == {"n": 1}
        migrate.check_current(operator, PLUGIN)


def test_the_operator_worker_and_reaper_take_runs_to_succeeded_under_their_roles(
    roles: str, tmp_path: pathlib.Path
) -> None:
    key_file = tmp_path / "sealing-key"
    key_file.write_bytes(Fernet.generate_key())
    worker_url = _url(roles, "ferryman_worker")
    with DemoCRM.start(seed=11, malformed_rate=0.05, **DATA) as crm:
        sealed = contract.Sealed(
            ("http://127.0.0.1:*",),
            contract.Sealer(key_file.read_bytes()).seal(
                contract.Credential({"token": crm.api_key}, ("http://127.0.0.1:*",))
            ),
        )
        by_hand = contract.mapping_document({"provider": "democrm"}, "by-hand")
        with _as(roles, "ferryman_operator") as operator:
            assert contract.connection_budget(operator).available > 0
            mapped = contract.admit(operator, _run(crm.url, "mapped", "acme"), 2, sealed=sealed)
            functions = contract.admit(
                operator,
                _run(crm.url, "by-hand", "byhand", mapping="by-hand"),
                2,
                mapping=by_hand,
                sealed=sealed,
            )
            assert contract.suspend(operator, "team-a/mapped")
            assert contract.resume(operator, "team-a/mapped")
        env = {"FERRYMAN_SEALING_KEY_FILE": str(key_file)}
        worker = Subprocess(worker_url, "migrations:2,default:1", env)
        try:
            worker.wait_ready()
            reaped = [_ferryman(worker_url, "reap")]
            finished = [wait_finished(roles, run_id, timeout=300) for run_id in (mapped, functions)]
            reaped.append(_ferryman(worker_url, "reap"))
            assert [run["state"] for run in finished] == ["succeeded"] * 2, worker.stderr()
        finally:
            worker.stop()
        truth = crm.truth()
    assert [done.returncode for done in reaped] == [0, 0], [done.stderr for done in reaped]
    for workspace in ("acme", "byhand"):
        check_against_truth(roles, truth, workspace)
    _operator_reads_and_cancels(roles, crm.url, sealed)


def _operator_reads_and_cancels(db_url: str, url: str, sealed: contract.Sealed) -> None:
    now = datetime.datetime.now(datetime.UTC)
    with _as(db_url, "ferryman_operator") as operator:
        [done] = contract.progress(operator, "team-a/mapped")
        assert done.state is contract.RunState.SUCCEEDED and done.rows_written > 0
        assert set(contract.live_progress(operator, ["team-a/mapped", "team-a/by-hand"], now)) == {
            "team-a/mapped",
            "team-a/by-hand",
        }
        assert contract.eta(operator, done.id) is None
        assert contract.retrying(operator, done.id, now) is None
        contract.admit(operator, _run(url, "cancelled", "gamma"), 2, sealed=sealed)
        assert contract.cancel(operator, "team-a/cancelled")
        assert contract.forget(operator, "team-a/cancelled") is not None
        for table in [*TABLES.values(), "crm_deal_people"]:  # every one the runs wrote
            delete = sql.SQL("DELETE FROM {} WHERE false").format(sql.Identifier(table))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                operator.execute(delete)


def _run(url: str, name: str, workspace: str, mapping: str | None = None) -> contract.MigrationRun:
    spec: dict[str, Any] = {
        "workspace": workspace,
        "source": {
            "provider": "democrm",
            "baseURL": url,
            "credentialsSecretRef": {"name": SECRET["name"], "key": SECRET["key"]},
        },
        "options": {"pageSize": 50},
    }
    if mapping is not None:
        spec["mapping"] = {"name": mapping}
    document = {
        "apiVersion": "ferryman.dev/v1alpha1",
        "kind": "MigrationRun",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": spec,
    }
    return contract.parse_run(document, source=f"team-a/{name}")


def _ferryman(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRYMAN_")}
    env.update({"FERRYMAN_DATABASE_URL": db_url, "PYTHONPATH": str(SUPPORT)})
    return subprocess.run(
        [sys.executable, "-m", "ferryman_worker.cli", "--log-level", "WARNING", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
