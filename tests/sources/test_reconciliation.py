"""A run says Succeeded only when each kind's listing adds up to what the source says it holds,
against json-server (its ``X-Total-Count`` header): a listing that stops early fails its run
with the counts, the rule that ended it and the fix; a listing declared right reconciles."""

from __future__ import annotations

import datetime
import pathlib
from typing import Any

import httpx
import pytest
import yaml
from runfiles import ferryman_run
from source_servers import Running

from ferryman_worker import report
from ferryman_worker.db import connect

pytestmark = pytest.mark.slow
EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sources"
PAGE = 200
RUN = "default/jsonserver-crm"  # the example run's namespace/name


def _organizations(
    json_server: Running, folder: pathlib.Path, db_url: str, query: dict[str, Any], exit_code: int
) -> str:
    """``ferryman run`` of the organizations only, walked by the Link header with
    ``X-Total-Count`` declared as the total, the first request carrying ``query``."""
    provider = yaml.safe_load((EXAMPLES / "json-server" / "provider.yaml").read_text())
    kind = provider["spec"]["kinds"]["organizations"]
    kind["request"] = {"path": "/organizations", "query": query}
    kind["pagination"] = {
        "style": "link_header",
        "sizeParam": "_limit",
        "maxPageSize": 1000,
        "stop": {"totalHeader": "X-Total-Count"},
    }
    provider["spec"]["kinds"] = {"organizations": kind}
    provider["spec"]["phases"] = [["organizations"]]
    run = yaml.safe_load((EXAMPLES / "json-server" / "run.yaml").read_text())
    run["spec"]["source"]["baseURL"] = json_server.url
    run["spec"]["options"] = {"pageSize": PAGE}
    provider_path, run_path = folder / "provider.yaml", folder / "run.yaml"
    provider_path.write_text(yaml.safe_dump(provider))
    run_path.write_text(yaml.safe_dump(run))
    return ferryman_run(run_path, provider_path, db_url, "jsonserver", "unused", exit_code)


def _run_and_verdicts(db_url: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    with connect.connect(db_url) as conn:
        run = conn.execute("SELECT state, error FROM ferryman_runs").fetchone()
        rows = conn.execute("SELECT kind, verdict, listed, total, note FROM ferryman_run_kinds")
        verdicts = {row["kind"]: row for row in rows}
    assert run is not None
    return run, verdicts


def _total(json_server: Running) -> int:
    reply = httpx.get(f"{json_server.url}/organizations", params={"_page": 1, "_limit": 1})
    return int(reply.headers["X-Total-Count"])


def test_a_link_header_listing_without_its_page_parameter_fails_the_run_naming_the_fix(
    json_server: Running, tmp_path: pathlib.Path, db_url: str
) -> None:
    """json-server sends its Link header only when ``_page`` is asked for: without it the walk
    ends after its first page, although every answer says how many records there are."""
    total = _total(json_server)
    assert total > PAGE
    out = _organizations(json_server, tmp_path, db_url, {}, exit_code=1)
    run, verdicts = _run_and_verdicts(db_url)
    assert run["state"] == "failed"
    assert verdicts["organizations"]["verdict"] == "short"
    assert (verdicts["organizations"]["listed"], verdicts["organizations"]["total"]) == (
        PAGE,
        total,
    )
    error = run["error"]
    assert f"organizations: listed {PAGE:,} of the {total:,} records" in error
    assert f"short by {total - PAGE:,}" in error
    assert "the walk ended on no next token" in error
    assert "_page" in error and "request.query" in error  # the likely fix
    assert "Failed" in out and "short by" in out
    with connect.connect(db_url) as conn:
        found = report.build(conn, RUN, datetime.datetime.now(datetime.UTC))
    [kind] = found.kinds
    assert (kind.verdict, kind.listed, kind.stated_total, kind.short_by) == (
        "short", PAGE, total, total - PAGE,
    )  # fmt: skip
    assert found.complete is False
    text = report.render(found, "text")
    assert f"short by {total - PAGE:,}" in text and "NOT complete" in text


def test_a_link_header_listing_with_its_page_parameter_reconciles_with_the_total(
    json_server: Running, tmp_path: pathlib.Path, db_url: str
) -> None:
    total = _total(json_server)
    out = _organizations(json_server, tmp_path, db_url, {"_page": 1}, exit_code=0)
    run, verdicts = _run_and_verdicts(db_url)
    assert run["state"] == "succeeded", run["error"]
    found = verdicts["organizations"]
    assert (found["verdict"], found["listed"], found["total"]) == ("reconciled", total, total)
    assert "Succeeded" in out and "reconciled" in out
