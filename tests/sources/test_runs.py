"""``ferryman run`` of the examples in examples/sources against the real servers: each ends
Succeeded with exactly the records the server's own API counts, each written once."""

from __future__ import annotations

import pathlib

import pytest
from migration import landed_once
from runfiles import ferryman_run
from source_servers import Running

from ferryman_worker.db import connect

pytestmark = pytest.mark.slow
EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sources"
RECONCILED_BUT_KEYSET = {
    "deals": "reconciled",
    "notes": "unverified",  # a keyset listing states no total of the whole
    "organizations": "reconciled",
    "people": "reconciled",
}
"""Each example's verdicts: every listing reconciled with its server's count but notes'."""


def _run(
    example: str, url: str, folder: pathlib.Path, db_url: str, secret: str, token: str = "unused"
) -> str:
    """``ferryman run`` of the example's run.yaml (at ``url``) with its provider.yaml."""
    run = (EXAMPLES / example / "run.yaml").read_text()
    path = folder / "run.yaml"
    path.write_text(run.replace("http://127.0.0.1:3000", url))
    return ferryman_run(path, EXAMPLES / example / "provider.yaml", db_url, secret, token)


def _phases(db_url: str) -> list[list[str]]:
    """The phases of the one run, which succeeded."""
    with connect.connect(db_url) as conn:
        run = conn.execute("SELECT state, phases FROM ferryman_runs").fetchone()
    assert run is not None and run["state"] == "succeeded"
    phases: list[list[str]] = run["phases"]
    return phases


def _verdicts(db_url: str) -> dict[str, str]:
    """Each kind's verdict: its listing against the total the server stated."""
    with connect.connect(db_url) as conn:
        rows = conn.execute("SELECT kind, verdict FROM ferryman_run_kinds ORDER BY kind")
        return {row["kind"]: row["verdict"] for row in rows}


def test_json_server_is_migrated_exactly_once_in_four_pagination_styles(
    json_server: Running, tmp_path: pathlib.Path, db_url: str
) -> None:
    """Link header, page numbers, offsets and keyset (whose pages overlap by one record: the
    ledger writes it once)."""
    out = _run("json-server", json_server.url, tmp_path, db_url, "jsonserver")
    assert "Succeeded" in out
    assert _phases(db_url) == [["organizations"], ["people"], ["deals"], ["notes"]]
    landed_once(db_url, "jsonserver", json_server.counts)  # the server's X-Total-Count
    # every listing but the keyset's (its X-Total-Count counts what is left) is reconciled
    assert _verdicts(db_url) == RECONCILED_BUT_KEYSET, out


def test_pocketbase_is_migrated_exactly_once_by_page_number_and_keyset(
    pocketbase: Running, tmp_path: pathlib.Path, db_url: str
) -> None:
    """Pages by number with PocketBase's totals (striped), keyset on the text ids for notes;
    the credential is a PocketBase token in the Authorization header."""
    token = pocketbase.tokens["user"]
    out = _run("pocketbase", pocketbase.url, tmp_path, db_url, "pocketbase", token)
    assert "Succeeded" in out and token not in out
    assert _phases(db_url) == [["organizations"], ["people"], ["deals"], ["notes"]]
    landed_once(db_url, "pocketbase", pocketbase.counts)  # PocketBase's totalItems
    # reconciled with totalItems; notes' keyset skips the totals (skipTotal)
    assert _verdicts(db_url) == RECONCILED_BUT_KEYSET, out
    assert "listed 2,000, the source states 2,000 (totalItems)" in out, out
