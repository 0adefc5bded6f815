"""The demo CRM's mapping against its hand-written PL/pgSQL writers: the same data imported both
ways (two workspaces, one database) gives the same destination rows and the same ledger, row by
row, references compared through the source ids they point at."""

from __future__ import annotations

import dataclasses
from typing import Any

from migration import credential, engine_worker, request, start_run, wait_finished
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker import destinations
from ferryman_worker.db import connect

DATA: dict[str, Any] = {
    "organizations": 300,
    "people": 200,
    "deals": 30,
    "messages_per_deal": 2,
    "malformed_rate": 0.05,
}

# Each destination table as comparable rows: foreign keys replaced by the source id they point at.
VIEWS = {
    "crm_organizations": """
        SELECT source_id, name, domain, created_at FROM crm_organizations WHERE workspace = %s""",
    "crm_people": """
        SELECT p.source_id, o.source_id AS org, p.name, p.email, p.phone
          FROM crm_people p LEFT JOIN crm_organizations o ON o.id = p.organization_id
         WHERE p.workspace = %s""",
    "crm_deals": """
        SELECT d.source_id, o.source_id AS org, d.title, d.value, d.currency, d.stage, d.status
          FROM crm_deals d LEFT JOIN crm_organizations o ON o.id = d.organization_id
         WHERE d.workspace = %s""",
    "crm_deal_people": """
        SELECT d.source_id AS deal, p.source_id AS person
          FROM crm_deal_people dp JOIN crm_deals d ON d.id = dp.deal_id
          JOIN crm_people p ON p.id = dp.person_id
         WHERE d.workspace = %s""",
    "crm_messages": """
        SELECT m.source_id, d.source_id AS deal, m.subject, m.sender, m.sent_at, m.body
          FROM crm_messages m LEFT JOIN crm_deals d ON d.id = m.deal_id
         WHERE m.workspace = %s""",
    "ledger": """
        SELECT l.kind, l.source_id,
               coalesce(o.source_id, p.source_id, d.source_id, m.source_id) AS row_source_id
          FROM ferryman_ledger l
          LEFT JOIN crm_organizations o ON l.kind = 'organizations' AND o.id = l.row_id
          LEFT JOIN crm_people p ON l.kind = 'people' AND p.id = l.row_id
          LEFT JOIN crm_deals d ON l.kind = 'deals' AND d.id = l.row_id
          LEFT JOIN crm_messages m ON l.kind = 'messages' AND m.id = l.row_id
         WHERE l.workspace = %s""",
    "row_errors": """
        SELECT e.kind, e.source_id, e.reason
          FROM ferryman_row_errors e JOIN ferryman_runs r ON r.id = e.run_id
         WHERE r.workspace = %s""",
}


def _rows(conn: connect.Connection, workspace: str) -> dict[str, list[tuple[Any, ...]]]:
    return {
        name: sorted(
            (tuple(row.values()) for row in conn.execute(query, (workspace,)).fetchall()),
            key=repr,
        )
        for name, query in VIEWS.items()
    }


def test_the_mapping_writes_what_the_hand_written_writers_write(db_url: str) -> None:
    handwritten = {"provider": "democrm"}  # maps no kind: the provider's PL/pgSQL writers
    with DemoCRM.start(seed=5, **DATA) as crm, credential(crm.api_key), engine_worker(db_url):
        first = start_run(
            db_url, dataclasses.replace(request(crm.url, "by-hand", "byhand"), mapping=handwritten)
        )
        assert wait_finished(db_url, first)["state"] == "succeeded"
        second = start_run(db_url, request(crm.url, "by-mapping", "bymapping"))
        assert wait_finished(db_url, second)["state"] == "succeeded"
    with connect.connect(db_url) as conn:
        runs = {
            row["workspace"]: row["mapping"]
            for row in conn.execute("SELECT workspace, mapping FROM ferryman_runs").fetchall()
        }
        by_hand, by_mapping = _rows(conn, "byhand"), _rows(conn, "bymapping")
    assert runs["byhand"]["mapping"] == {"provider": "democrm"}
    shipped = destinations.builtin("democrm")
    assert shipped is not None and set(runs["bymapping"]["mapping"]["kinds"]) == set(shipped.kinds)
    for name in VIEWS:
        assert by_mapping[name], f"{name}: nothing written"
        assert by_mapping[name] == by_hand[name], name
    assert all(row[1] == str(row[2]) for row in by_mapping["ledger"])  # each slot: its record
