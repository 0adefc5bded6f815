"""``ferryman provider sample`` against the demo CRM: the first pages read as a run reads them,
records parsed, the malformed ones named with their reasons, the listing's end said; nothing
written (no database is involved at all)."""

from __future__ import annotations

import pathlib
import re

import httpx
import pytest
import yaml
from tests.democrm.conftest import SMALL, StartDemoCRM
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker import cli
from ferryman_worker.providers.democrm import PROVIDER_FILE


def _sample(crm: DemoCRM, *args: str) -> int:
    return cli.main(
        ["provider", "sample", str(PROVIDER_FILE), "--base-url", crm.url, "--show", "1", *args]
    )


def test_sample_shows_parsed_records_and_each_malformed_one_with_its_reason(
    shared_democrm: DemoCRM, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FERRYMAN_SOURCE_TOKEN", shared_democrm.api_key)
    assert _sample(shared_democrm, "--kind", "organizations", "--page-size", "50") == 0
    out = capsys.readouterr().out
    truth = shared_democrm.truth()["organizations"]
    expected = sorted(int(i) for i in truth["malformed"] if int(i) <= 100)
    pages = re.findall(
        r"^page (\d) \(token (\d+)\): 50 records, (\d+) parsed, (\d+) malformed", out, re.M
    )
    assert [(p, t) for p, t, _, _ in pages] == [("1", "0"), ("2", "50")]
    assert sum(int(bad) for _, _, _, bad in pages) == len(expected)
    assert sorted(int(i) for i in re.findall(r"^  malformed (\d+): \w+", out, re.M)) == expected
    assert "malformed 6: name: Field required" in out  # truth: missing:name
    assert '{"id": 1, "name": ' in out
    assert shared_democrm.api_key not in out


def test_sample_says_where_the_listing_ends_and_reads_a_tree_kind_s_bodies(
    shared_democrm: DemoCRM, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FERRYMAN_SOURCE_TOKEN", shared_democrm.api_key)
    assert _sample(shared_democrm, "--kind", "deals", "--page-size", "20", "--pages", "5") == 0
    out = capsys.readouterr().out
    assert "page 2 (token 20): 5 records" in out and "ends here (a short page)" in out
    assert "page 3" not in out
    assert _sample(shared_democrm, "--kind", "messages", "--parent", "1") == 0
    out = capsys.readouterr().out
    assert "ends here (pagination.more is false)" in out and '"body": ' in out
    assert "malformed 1: gone from the source before its body was fetched" in out


def test_sample_names_what_is_missing(
    shared_democrm: DemoCRM, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("FERRYMAN_SOURCE_TOKEN", raising=False)
    assert _sample(shared_democrm, "--kind", "deals") == 2
    assert "set FERRYMAN_SOURCE_TOKEN" in capsys.readouterr().err
    monkeypatch.setenv("FERRYMAN_SOURCE_TOKEN", shared_democrm.api_key)
    assert _sample(shared_democrm, "--kind", "tickets") == 2
    assert "--kind: 'democrm' has no kind 'tickets'" in capsys.readouterr().err
    assert _sample(shared_democrm, "--kind", "messages") == 2
    assert "--parent: 'messages' is listed per 'deals' record" in capsys.readouterr().err


def test_sample_reads_with_an_oauth2_client_credentials_grant(
    start_democrm: StartDemoCRM,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    crm = start_democrm(api_key=None, oauth_client_id="app", oauth_client_secret="s3cret", **SMALL)
    document = yaml.safe_load(PROVIDER_FILE.read_text())
    grant = {"grant": "client_credentials", "tokenUrl": "/oauth/token", "clientAuth": "post"}
    document["spec"]["auth"] = {"style": "oauth2", "oauth2": grant}
    provider = tmp_path / "crm.yaml"
    provider.write_text(yaml.safe_dump(document))
    monkeypatch.setenv("FERRYMAN_SOURCE_CLIENT_ID", "app")
    monkeypatch.setenv("FERRYMAN_SOURCE_CLIENT_SECRET", "s3cret")
    argv = ["provider", "sample", str(provider), "--base-url", crm.url, "--kind", "people"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "page 1 (token 0): 20 records" in out and "s3cret" not in out
    assert httpx.get(f"{crm.url}/_oauth").json()["client_credentials"] == 1
