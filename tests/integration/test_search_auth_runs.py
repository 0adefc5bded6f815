"""``ferryman run`` of declarative providers that list the demo CRM through its search (POST, the
cursor carried in the JSON body: tests/integration/providers/), authenticated by HTTP basic and by
an API key in a query parameter: every record the server holds lands exactly once, and the secret
is nowhere in what the run printed or logged (at DEBUG, where every request's URL is logged) nor
in any table it wrote."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from typing import Any

from migration import landed_once
from psycopg import sql
from runfiles import command_env, run_yaml
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker.db import connect
from ferryman_worker.engine.runtime import credential_env_var

PROVIDERS = pathlib.Path(__file__).resolve().parent / "providers"
SECRET = "democrm-token"  # the Secret run_yaml's MigrationRun names
DATASET = {"seed": 11, "organizations": 300, "people": 150, "deals": 60, "malformed_rate": 0.05}
KINDS = ("organizations", "people", "deals")
PAGE = 40  # the limit in the providers' search bodies


def _ferryman(
    folder: pathlib.Path, url: str, provider: str, db_url: str, keys: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``ferryman run`` (logging at DEBUG) of the demo CRM at ``url`` with the provider file
    ``provider``, the run's credential (Secret ``SECRET``) holding ``keys``."""
    run = folder / "run.yaml"
    run.write_text(run_yaml(url).replace("provider: democrm", "provider: crmsearch"))
    env = command_env(
        None,
        FERRYMAN_DATABASE_URL=db_url,
        FERRYMAN_LANES="migrations:4",
        **{credential_env_var(SECRET, key): value for key, value in keys.items()},
    )
    argv = [sys.executable, "-m", "ferryman_worker.cli", "--log-level", "DEBUG", "run", str(run)]
    argv += ["--provider-file", str(PROVIDERS / provider)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)


def _every_record_landed_once(db_url: str, truth: dict[str, Any]) -> None:
    """The well-formed records of each kind landed once; the malformed ones are exactly the
    row errors."""
    malformed = {kind: {str(i) for i in truth[kind]["malformed"]} for kind in KINDS}
    landed_once(db_url, "acme", {k: truth[k]["count"] - len(malformed[k]) for k in KINDS})
    with connect.connect(db_url) as conn:
        rows = conn.execute("SELECT kind, source_id FROM ferryman_row_errors").fetchall()
    errors = {kind: {r["source_id"] for r in rows if r["kind"] == kind} for kind in KINDS}
    assert errors == malformed and all(malformed.values())


def _searched_page_by_page(crm: DemoCRM) -> None:
    """Every call was a search (no GET listing), one a page of ``PAGE``: the cursor and the
    page size went in the body."""
    requests = crm.stats()["requests"]
    pages = {f"POST /v1/{kind}/search": {"200": -(-crm.options[kind] // PAGE)} for kind in KINDS}
    assert requests == pages


def _nowhere_in_the_database(db_url: str, secret: str) -> None:
    """``secret`` is in no row of any table: runs, tasks, row errors, landed records, jobs."""
    with connect.connect(db_url) as conn:
        tables = [row["tablename"] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        )]  # fmt: skip
        assert "ferryman_row_errors" in tables and "ferryman_landing" in tables
        for table in tables:
            query = sql.SQL("SELECT count(*) AS n FROM {} t WHERE strpos(t::text, %s) > 0")
            found = conn.execute(query.format(sql.Identifier(table)), (secret,)).fetchone()
            assert found is not None and found["n"] == 0, f"{table} holds the secret"


def test_a_search_listing_with_basic_auth_lands_every_record_once(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    password = "pa55-W0rd-of-the-basic-S3CRET"
    basic = {"auth": "basic", "user": "ada", "password": password}
    with DemoCRM.start(budget_capacity=100_000, **basic, **DATASET) as crm:
        keys = {"username": "ada", "password": password}
        done = _ferryman(tmp_path, crm.url, "democrm-search-basic.yaml", db_url, keys)
        truth = crm.truth()
        assert done.returncode == 0, done.stderr[-3000:]
        _searched_page_by_page(crm)
        assert set(crm.stats()["budgets"]) == {"ada"}  # charged to the basic user
    assert "Succeeded" in done.stdout
    _every_record_landed_once(db_url, truth)
    assert password not in done.stdout + done.stderr
    _nowhere_in_the_database(db_url, password)


def test_a_search_listing_with_a_query_key_lands_every_record_once_and_logs_no_key(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    key = "qk-7f2a9c-the-query-S3CRET"
    with DemoCRM.start(auth="query", api_key=key, **DATASET) as crm:
        done = _ferryman(tmp_path, crm.url, "democrm-search-query.yaml", db_url, {"token": key})
        truth = crm.truth()
        assert done.returncode == 0, done.stderr[-3000:]
        _searched_page_by_page(crm)
    assert "Succeeded" in done.stdout
    _every_record_landed_once(db_url, truth)
    # at DEBUG every request's URL is logged: with the key's value taken out
    assert f"POST {crm.url}/v1/organizations/search?api_key=***" in done.stderr
    assert key not in done.stdout + done.stderr
    _nowhere_in_the_database(db_url, key)


def test_a_refused_password_fails_the_run_naming_what_was_sent_and_not_the_password(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    wrong = "not-the-basic-passw0rd-S3CRET"
    with DemoCRM.start(auth="basic", user="ada", password="the-right-one", **DATASET) as crm:
        keys = {"username": "ada", "password": wrong}
        done = _ferryman(tmp_path, crm.url, "democrm-search-basic.yaml", db_url, keys)
    assert done.returncode != 0
    assert "the source refused the username and password sent as HTTP basic" in done.stdout
    assert wrong not in done.stdout + done.stderr
    _nowhere_in_the_database(db_url, wrong)
