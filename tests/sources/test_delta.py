"""A delta run against PocketBase: after a full `ferryman run` of the example, records are edited,
added and deleted through PocketBase's own API; a delta run (mode Delta) of the same provider asks
organizations, people and deals only for what PocketBase wrote since the full run started (its
`updated` time, the kinds' changedSince filter) and lists notes whole (the ledger skips the
unchanged). It updates exactly the edited records' landed rows, inserts the new one, and leaves
every other row and ledger version as it was, the deleted record's too: PocketBase does not list
deletions, so the delta cannot see them."""

from __future__ import annotations

import pathlib
from typing import Any

import httpx
import pytest
import yaml
from runfiles import ferryman_run
from source_servers import StartServer
from source_servers import pb as pocketbase_module

from ferryman_worker.db import connect

pytestmark = pytest.mark.slow
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sources" / "pocketbase"


def _run(url: str, folder: pathlib.Path, db_url: str, token: str, name: str, mode: str) -> None:
    run = yaml.safe_load((EXAMPLE / "run.yaml").read_text())
    run["metadata"]["name"] = name
    run["spec"]["source"]["baseURL"] = url
    run["spec"]["mode"] = mode
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(run))
    out = ferryman_run(path, EXAMPLE / "provider.yaml", db_url, "pocketbase", token)
    assert "Succeeded" in out


def _landed(db_url: str) -> dict[tuple[str, str], dict[str, Any]]:
    with connect.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT f.kind, f.source_id, f.record, r.name AS run, l.source_version,"
            " l.source_deleted_at FROM ferryman_landing f JOIN ferryman_runs r ON r.id = f.run_id"
            " JOIN ferryman_ledger l ON l.workspace = f.workspace AND l.kind = f.kind"
            " AND l.source_id = f.source_id AND l.row_id = f.id"
        ).fetchall()
    return {(row["kind"], row["source_id"]): row for row in rows}


def _without(record: dict[str, Any], *fields: str) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in fields}


def test_a_delta_after_edits_through_the_api_updates_exactly_the_edited_records(
    start_pocketbase: StartServer, tmp_path: pathlib.Path, db_url: str
) -> None:
    server = start_pocketbase(organizations=40)
    token = server.tokens["user"]
    _run(server.url, tmp_path, db_url, token, "full", "Full")
    before = _landed(db_url)
    assert len(before) == sum(server.counts.values())
    org = pocketbase_module.record_id("organizations", 3)
    person = pocketbase_module.record_id("people", 5)
    note = pocketbase_module.record_id("notes", 8)
    gone = pocketbase_module.record_id("notes", 9)
    headers = {"Authorization": server.tokens["superuser"]}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60.0) as http:
        path = "/api/collections/{}/records/{}"
        http.patch(
            path.format("organizations", org), json={"name": "Renamed Ltd"}
        ).raise_for_status()
        http.patch(path.format("people", person), json={"title": "Chief Edits"}).raise_for_status()
        http.patch(path.format("notes", note), json={"body": "Edited."}).raise_for_status()
        http.delete(path.format("notes", gone)).raise_for_status()
        added = http.post(
            "/api/collections/organizations/records",
            json={"name": "Newcomer", "domain": "newcomer.example",
                  "created_at": "2026-01-01 00:00:00.000Z"},
        )  # fmt: skip
        added.raise_for_status()
    _run(server.url, tmp_path, db_url, token, "catch-up", "Delta")
    after = _landed(db_url)
    edited = {
        ("organizations", org): ("name", "Renamed Ltd"),
        ("people", person): ("title", "Chief Edits"),
        ("notes", note): ("body", "Edited."),
    }
    for key, row in before.items():
        now = after[key]
        if key in edited:
            field, value = edited[key]
            assert now["record"][field] == value and now["run"] == "default/catch-up"
            if key[0] == "notes":  # listed whole: its version is a digest of the record
                assert now["source_version"] != row["source_version"]
            else:  # listed by PocketBase's updated time: the version is that time, later
                assert now["source_version"] > row["source_version"]
            assert _without(now["record"], field, "updated") == _without(
                row["record"], field, "updated"
            )
        else:
            assert now == row, key  # the same record, version and run (the deleted note's too)
    assert after[("notes", gone)]["source_deleted_at"] is None  # PocketBase did not say
    new = set(after) - set(before)
    assert new == {("organizations", added.json()["id"])}
    with connect.connect(db_url) as conn:
        run = conn.execute(
            "SELECT sum(rows_written) AS written, sum(rows_skipped) AS skipped"
            " FROM ferryman_tasks t JOIN ferryman_runs r ON r.id = t.run_id"
            " WHERE r.name = 'default/catch-up'"
        ).fetchone()
    notes = server.counts["notes"]
    # listed by updated: only the edited and the new; notes listed whole: the rest skipped
    assert run == {"written": 4, "skipped": notes - 2}
