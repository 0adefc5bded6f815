"""``ferryman provider probe`` against real servers: from one live response each suggests the way
the server pages, as a snippet marked as a suggestion whose ``pagination`` a provider file
takes as it is, the credential sent to the probed host only."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
from typing import Any

import pytest
import yaml
from runfiles import command_env
from source_servers import ORGANIZATIONS, Running
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker.providers.declarative import spec

pytestmark = pytest.mark.slow


def _probe(url: str, *options: str, token: str | None = None) -> str:
    env = command_env(None, **({"FERRYMAN_SOURCE_TOKEN": token} if token else {}))
    argv = [sys.executable, "-m", "ferryman_worker.cli", "provider", "probe", url, *options]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    if token:
        assert token not in done.stdout + done.stderr
    return done.stdout


def _suggested(out: str) -> tuple[dict[str, Any], list[str]]:
    """The suggested ``pagination`` (checked as a kind of a provider file takes it) and the
    snippet's comment lines."""
    lines = out.splitlines()
    assert lines[0].startswith("# SUGGESTION from one response (HTTP 200) of GET ")
    assert "Nothing was chosen for you" in lines[1]
    found = yaml.safe_load(out)
    kind = {"request": {"path": "/x"}, "fields": {"id": {}}, **found}
    spec.KindSpec.model_validate(kind)  # a provider file takes it as it is
    return found["pagination"], [line for line in lines if line.startswith("#")]


def test_json_server_pages_suggest_its_link_header_and_total_count(json_server: Running) -> None:
    out = _probe(f"{json_server.url}/organizations?_page=1&_limit=50")
    pagination, notes = _suggested(out)
    assert pagination == {
        "style": "link_header",
        "sizeParam": "_limit",
        "stop": {"totalHeader": "X-Total-Count"},
    }
    assert any("style: page_number" in note and "pageParam: _page" in note for note in notes)
    assert yaml.safe_load(out)["request"] == {"path": "/organizations", "query": {"_page": "1"}}
    assert any("request.query keeps _page from the probed URL" in note for note in notes)


def test_json_servers_suggestion_used_as_printed_walks_the_whole_listing(
    json_server: Running, tmp_path: pathlib.Path
) -> None:
    suggested = yaml.safe_load(_probe(f"{json_server.url}/organizations?_page=1&_limit=50"))
    kind = {**suggested, "fields": {"id": {"type": "integer", "required": True}}}
    provider = tmp_path / "probed.yaml"
    provider.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "ferryman.dev/v1alpha1",
                "kind": "MigrationProvider",
                "metadata": {"name": "probed"},
                "spec": {"auth": {"style": "none"}, "kinds": {"organizations": kind}},
            }
        )
    )
    argv = ["provider", "sample", str(provider), "--kind", "organizations"]
    argv += ["--base-url", json_server.url, "--pages", "1000", "--page-size", "100"]
    done = subprocess.run(
        [sys.executable, "-m", "ferryman_worker.cli", *argv],
        env=command_env(None),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    pages = re.findall(r"^page \d+ \(token .*\): (\d+) records", done.stdout, re.M)
    assert sum(int(n) for n in pages) == ORGANIZATIONS


def test_json_server_offsets_suggest_offset_paging(json_server: Running) -> None:
    pagination, _ = _suggested(_probe(f"{json_server.url}/people?_start=0&_limit=50"))
    assert pagination == {
        "style": "offset",
        "offsetParam": "_start",
        "sizeParam": "_limit",
        "stop": {"totalHeader": "X-Total-Count"},
    }


def test_pocketbase_suggests_page_numbers_with_its_totals(
    pocketbase: Running, tmp_path: pathlib.Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(pocketbase.tokens["user"])
    url = f"{pocketbase.url}/api/collections/deals/records?page=1&perPage=50"
    out = _probe(
        url, "--auth", "header", "--auth-name", "Authorization", "--token-file", str(token_file)
    )
    assert pocketbase.tokens["user"] not in out
    pagination, _ = _suggested(out)
    assert yaml.safe_load(out)["records"] == "items"
    assert pagination == {
        "style": "page_number",
        "pageParam": "page",
        "totalPages": "totalPages",
        "sizeParam": "perPage",
        "stop": {"total": "totalItems"},
    }


def test_the_demo_crm_suggests_offsets_ended_by_its_more_flag() -> None:
    with DemoCRM.start(organizations=60, people=10, deals=5) as crm:
        out = _probe(f"{crm.url}/v1/organizations", token=crm.api_key)
    pagination, notes = _suggested(out)
    assert yaml.safe_load(out)["records"] == "data"
    assert pagination == {
        "style": "offset",
        "offsetParam": "start",
        "sizeParam": "limit",
        "stop": {"more": "pagination.more"},
    }
    assert "pagination.next_start" in notes[3]  # why: the body's next offset
