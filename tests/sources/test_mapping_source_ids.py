"""A provider whose records carry their id in a field of another name (``id: company_id``),
against json-server and a real application table: a mapping that leaves ``sourceId`` out reads
the provider's declared id; ``mapping check --provider`` names a pointer that cannot resolve;
and a run whose mapping's ``sourceId`` names no field fails the kind at its first window, never
recording every record as malformed."""

from __future__ import annotations

import pathlib
from typing import Any

import httpx
import pytest
import yaml
from runfiles import ferryman_run
from source_servers import Running

from ferryman_worker import cli
from ferryman_worker.db import connect

pytestmark = pytest.mark.slow
EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sources"
TABLE = "CREATE TABLE app_companies (id bigserial PRIMARY KEY, workspace text NOT NULL, name text)"


def _files(folder: pathlib.Path, url: str, source_id: str | None) -> dict[str, pathlib.Path]:
    """The json-server example's organizations, whose id the provider declares as company_id
    (read from json-server's id), mapped to app_companies (``sourceId``: ``source_id``, or
    left out); and a run of them at ``url``."""
    provider = yaml.safe_load((EXAMPLES / "json-server" / "provider.yaml").read_text())
    kind = provider["spec"]["kinds"]["organizations"]
    del kind["fields"]["id"]
    kind["fields"]["company_id"] = {"type": "integer", "required": True, "source": "id"}
    kind["id"] = "company_id"
    provider["spec"]["kinds"] = {"organizations": kind}
    provider["spec"]["phases"] = [["organizations"]]
    organizations: dict[str, Any] = {
        "table": "app_companies",
        "workspaceColumn": "workspace",
        "columns": {"workspace": {"constant": "workspace"}, "name": {"field": "/name"}},
    }
    if source_id is not None:
        organizations["sourceId"] = source_id
    mapping = {"provider": "jsonserver", "kinds": {"organizations": organizations}}
    run = yaml.safe_load((EXAMPLES / "json-server" / "run.yaml").read_text())
    run["spec"]["source"]["baseURL"] = url
    run["spec"]["mapping"] = {"file": "mapping.yaml"}
    paths = {name: folder / f"{name}.yaml" for name in ("provider", "mapping", "run")}
    for name, document in (("provider", provider), ("mapping", mapping), ("run", run)):
        paths[name].write_text(yaml.safe_dump(document))
    return paths


@pytest.fixture
def app_url(db_url: str) -> str:
    with connect.connect(db_url) as conn:
        conn.execute(TABLE)
    return db_url


def _check(paths: dict[str, pathlib.Path], url: str) -> int:
    argv = ["mapping", "check", str(paths["mapping"]), "--database", url]
    return cli.main([*argv, "--provider", str(paths["provider"])])


def test_check_names_a_source_id_pointer_the_providers_records_cannot_resolve(
    json_server: Running, tmp_path: pathlib.Path, app_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _check(_files(tmp_path, json_server.url, "/id"), app_url) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert out[0].startswith("kinds.organizations.sourceId: /id cannot resolve:")
    assert out[0].endswith("its declared id is 'company_id': set sourceId: /company_id")


def test_check_reads_a_left_out_source_id_as_the_providers_declared_id(
    json_server: Running, tmp_path: pathlib.Path, app_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _check(_files(tmp_path, json_server.url, None), app_url) == 0
    assert capsys.readouterr().out == (
        "the mapping fits this database and provider 'jsonserver': organizations\n"
    )


def _counts(url: str) -> dict[str, Any]:
    with connect.connect(url) as conn:
        found = conn.execute(
            "SELECT (SELECT state FROM ferryman_runs) AS state,"
            " (SELECT error FROM ferryman_runs) AS error,"
            " (SELECT count(*) FROM app_companies) AS rows,"
            " (SELECT count(*) FROM ferryman_row_errors) AS errors,"
            " (SELECT array_agg(source_id::int ORDER BY source_id::int) FROM ferryman_ledger)"
            " AS ids"
        ).fetchone()
    assert found is not None
    return found


def test_a_mapping_that_leaves_source_id_out_writes_every_record_by_the_declared_id(
    json_server: Running, tmp_path: pathlib.Path, app_url: str
) -> None:
    paths = _files(tmp_path, json_server.url, None)
    ferryman_run(paths["run"], paths["provider"], app_url, "jsonserver", "unused")
    ids = [r["id"] for r in httpx.get(f"{json_server.url}/organizations").json()]
    found = _counts(app_url)
    assert (found["state"], found["rows"], found["errors"]) == ("succeeded", len(ids), 0)
    assert found["ids"] == sorted(ids)


def test_a_source_id_naming_no_field_fails_the_kind_at_its_first_window(
    json_server: Running, tmp_path: pathlib.Path, app_url: str
) -> None:
    """Past `mapping check` (not run), the mapping's sourceId reads a field the records lack:
    the ledger's NOT NULL refuses the first row; the kind fails, none recorded as malformed."""
    paths = _files(tmp_path, json_server.url, "/id")
    out = ferryman_run(paths["run"], paths["provider"], app_url, "jsonserver", "unused", 1)
    found = _counts(app_url)
    assert (found["state"], found["rows"], found["errors"], found["ids"]) == ("failed", 0, 0, None)
    assert "MappingRefused" in found["error"]
    assert "set the mapping's kinds.organizations.sourceId to /company_id" in found["error"]
    assert "Failed" in out
