"""Delta runs against the demo CRM with its changes on: after a full run, records are edited,
added and deleted on the server; a delta run lists only what changed since the full run
started, updates exactly the changed rows through their ledger ids (an application trigger
counts the updates), inserts the new ones, records the deletions its listing reports (the rows
stay, or, as the mapping's onDeleted says, are deleted or marked deleted) and leaves the rest as
they were. A window written twice applies its changes once; a change older than the imported
version is never applied; a delta without a successful run before it is refused."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from migration import (
    SECRET,
    credential,
    engine_worker,
    extra_claims,
    request,
    start_run,
    wait_finished,
)
from net import wait_for
from psycopg.types.json import Jsonb
from tests.democrm.server_fixture import DemoCRM
from workers import Subprocess, scalar

from ferryman_worker import destinations, providers
from ferryman_worker.db import connect
from ferryman_worker.engine import runs
from ferryman_worker.engine.runtime import credential_env_var
from ferryman_worker.errors import ConfigurationError

KINDS = ["organizations", "people", "deals"]
DATA: dict[str, Any] = {
    "organizations": 120,
    "people": 90,
    "deals": 30,
    "messages_per_deal": 0,
    "malformed_rate": 0.0,
}
TABLES = {"organizations": "crm_organizations", "people": "crm_people", "deals": "crm_deals"}
UNCHANGED = "t:2015-01-01T00:00:00.000000"

# An application's trigger: every update of a destination row, counted.
COUNT_UPDATES = """
CREATE TABLE app_updates (tbl text NOT NULL, row_id bigint NOT NULL);
CREATE FUNCTION app_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO app_updates VALUES (TG_TABLE_NAME, NEW.id);
    RETURN NEW;
END $$;
CREATE TRIGGER app_count AFTER UPDATE ON crm_organizations
    FOR EACH ROW EXECUTE FUNCTION app_count_update();
CREATE TRIGGER app_count AFTER UPDATE ON crm_people
    FOR EACH ROW EXECUTE FUNCTION app_count_update();
CREATE TRIGGER app_count AFTER UPDATE ON crm_deals
    FOR EACH ROW EXECUTE FUNCTION app_count_update();
"""


@pytest.fixture
def crm() -> Iterator[DemoCRM]:
    with DemoCRM.start(seed=19, **DATA) as server:
        server.change()  # changes on: updated_at served, updated_since honoured
        yield server


def _delta(url: str, name: str, **options: Any) -> runs.RunRequest:
    return dataclasses.replace(request(url, name, kinds=KINDS, **options), mode="delta")


def _run(
    db_url: str,
    url: str,
    name: str,
    mode: str = "full",
    mapping: dict[str, Any] | None = None,
    kinds: list[str] = KINDS,
) -> dict[str, Any]:
    req = dataclasses.replace(request(url, name, kinds=kinds), mode=mode, mapping=mapping)  # type: ignore[arg-type]
    run_id = start_run(db_url, req)
    return wait_finished(db_url, run_id)


def _mapping(**on_deleted: Any) -> dict[str, Any]:
    """The shipped demo CRM mapping, each kind named given its ``onDeleted``."""
    shipped = destinations.builtin("democrm")
    assert shipped is not None
    document = destinations.mapping.dump(shipped)
    for kind, action in on_deleted.items():
        document["kinds"][kind]["onDeleted"] = action
    return document


def _people_in_and_out_of_deals(db_url: str) -> tuple[int, int]:
    """A person some deal names (crm_deal_people refers to the row) and one no deal names."""
    with connect.connect(db_url) as conn:
        row = conn.execute(
            "SELECT min(p.source_id) FILTER (WHERE j.person_id IS NOT NULL) AS named,"
            " min(p.source_id) FILTER (WHERE j.person_id IS NULL) AS free FROM crm_people p"
            " LEFT JOIN crm_deal_people j ON j.person_id = p.id WHERE p.source_id > 10"
        ).fetchone()
    assert row is not None and row["named"] is not None and row["free"] is not None
    return int(row["named"]), int(row["free"])


def _tables(db_url: str) -> dict[str, dict[int, dict[str, Any]]]:
    """Each kind's rows by source id, with the ledger's row id and version."""
    found: dict[str, dict[int, dict[str, Any]]] = {}
    with connect.connect(db_url) as conn:
        for kind, table in TABLES.items():
            rows = conn.execute(
                "SELECT t.*, l.row_id AS ledger_row, l.source_version, l.source_deleted_at"  # type: ignore[arg-type]
                f" FROM {table} t JOIN ferryman_ledger l ON l.kind = %s"
                " AND l.workspace = t.workspace AND l.source_id = t.source_id::text",
                (kind,),
            ).fetchall()
            found[kind] = {int(row["source_id"]): row for row in rows}
    return found


def _updates(db_url: str) -> list[tuple[str, int]]:
    with connect.connect(db_url) as conn:
        rows = conn.execute("SELECT tbl, row_id FROM app_updates ORDER BY 1, 2").fetchall()
    return [(row["tbl"], row["row_id"]) for row in rows]


def test_a_delta_updates_the_changed_rows_inserts_the_new_and_leaves_the_rest(
    crm: DemoCRM, db_url: str
) -> None:
    with credential(crm.api_key), engine_worker(db_url):
        assert _run(db_url, crm.url, "full")["state"] == "succeeded"
        before = _tables(db_url)
        with connect.connect(db_url) as conn:
            conn.execute(COUNT_UPDATES)
        crm.change(
            update={"organizations": [2], "people": [3, 7, 50], "deals": [5]},
            add={"organizations": 1, "people": 2},
            delete={"people": [9]},
        )
        done = _run(db_url, crm.url, "catch-up", "delta")
    assert done["state"] == "succeeded"
    assert done["rows_written"] == 5 + 3 and done["rows_skipped"] == 0  # listed: only changes
    after = _tables(db_url)
    changed = {"organizations": {2}, "people": {3, 7, 50}, "deals": {5}}
    field = {"organizations": "name", "people": "name", "deals": "title"}
    for kind, rows in before.items():
        assert all(row["source_version"] == UNCHANGED for row in rows.values()), kind
        for source_id, row in rows.items():
            now = after[kind][source_id]
            assert now["id"] == row["id"] == now["ledger_row"]  # updated in place
            if source_id in changed[kind]:
                assert now[field[kind]] == row[field[kind]] + " (edit 1)", (kind, source_id)
                assert now["source_version"] > UNCHANGED
            elif (kind, source_id) == ("people", 9):  # deleted: recorded, the row left as it was
                assert now["source_deleted_at"] is not None and row["source_deleted_at"] is None
                assert {**now, "source_deleted_at": None} == row
            else:
                assert now == row, (kind, source_id)  # left exactly as it was
    assert set(after["organizations"]) - set(before["organizations"]) == {121}
    assert set(after["people"]) - set(before["people"]) == {91, 92}
    assert _updates(db_url) == sorted(
        (TABLES[kind], before[kind][i]["id"]) for kind, ids in changed.items() for i in ids
    )  # each changed row updated once, no other row touched


def test_on_deleted_delete_deletes_the_rows_and_records_a_refusal_with_its_reason(
    crm: DemoCRM, db_url: str
) -> None:
    """onDeleted: delete: the row of a person deleted at the source is deleted; a person a
    deal still names (the join table's foreign key refuses) is a row error with the database's
    reason, its row and ledger left for a next delta; the window's other change is written."""
    with credential(crm.api_key), engine_worker(db_url):
        assert _run(db_url, crm.url, "full")["state"] == "succeeded"
        before = _tables(db_url)
        named, free = _people_in_and_out_of_deals(db_url)
        crm.change(update={"people": [3]}, delete={"people": [named, free]})
        mapping = _mapping(people="delete")
        done = _run(db_url, crm.url, "catch-up", "delta", mapping)
    assert done["state"] == "succeeded", done["error"]
    after = _tables(db_url)
    assert free not in after["people"] and named in after["people"]
    assert set(before["people"]) - set(after["people"]) == {free}
    assert after["people"][3]["name"] == before["people"][3]["name"] + " (edit 1)"
    assert after["people"][named]["source_deleted_at"] is None  # not deleted: not recorded
    with connect.connect(db_url) as conn:
        ledger = conn.execute(
            "SELECT row_id, source_deleted_at FROM ferryman_ledger"
            " WHERE kind = 'people' AND source_id = %s",
            (str(free),),
        ).fetchone()
        errors = conn.execute(
            "SELECT e.kind, e.source_id, e.reason FROM ferryman_row_errors e"
            " JOIN ferryman_runs r ON r.id = e.run_id WHERE r.name = 'catch-up'"
        ).fetchall()
    assert ledger is not None and ledger["row_id"] == before["people"][free]["id"]
    assert ledger["source_deleted_at"] is not None
    assert [(e["kind"], e["source_id"]) for e in errors] == [("people", str(named))]
    assert errors[0]["reason"].startswith("database refused the row: update or delete on table")
    assert "crm_deal_people" in errors[0]["reason"]


def test_on_deleted_set_marks_the_rows_once(crm: DemoCRM, db_url: str) -> None:
    """onDeleted: {set: ...}: a soft delete marks the rows of the deleted records (the time
    is the ledger's) and only them; the same tombstone written again marks nothing."""
    soft = {"set": {"deleted_at": {"constant": "now"}, "archived": {"value": True}}}
    with credential(crm.api_key), engine_worker(db_url):
        assert _run(db_url, crm.url, "full")["state"] == "succeeded"
        named, _ = _people_in_and_out_of_deals(db_url)
        with connect.connect(db_url) as conn:  # the application's own migration, then its trigger
            conn.execute(
                "ALTER TABLE crm_people ADD COLUMN deleted_at timestamptz,"
                " ADD COLUMN archived boolean NOT NULL DEFAULT false"
            )
            conn.execute(COUNT_UPDATES)
        crm.change(delete={"people": [9, named]})
        done = _run(db_url, crm.url, "catch-up", "delta", _mapping(people=soft))
        assert done["state"] == "succeeded", done["error"]
        with connect.connect(db_url) as conn:
            run = conn.execute("SELECT * FROM ferryman_runs WHERE name = 'catch-up'").fetchone()
            assert run is not None
            writer = destinations.writer_for(run, providers.of_run(run), "people")
            params = {"rows": Jsonb([]), "workspace": "acme", "kind": "people", "run_id": 0}
            again = conn.execute(writer.rows_statement(), {**params, "deleted": ["9"]})
            assert again.fetchone() == {"written": 0, "matched": 0}
    after = _tables(db_url)["people"]
    marked = {i for i, row in after.items() if row["archived"]}
    assert marked == {9, named}
    for source_id, row in after.items():
        if source_id in marked:
            assert row["deleted_at"] == row["source_deleted_at"] is not None
        else:
            assert row["deleted_at"] is None and row["source_deleted_at"] is None
    assert _updates(db_url) == sorted(("crm_people", after[i]["id"]) for i in marked)


def _messages(db_url: str) -> dict[int, dict[str, Any]]:
    """Each message's row by source id, with its deal's source id and the ledger's version."""
    with connect.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT m.source_id, m.subject, m.body, d.source_id AS deal, l.source_version"
            " FROM crm_messages m JOIN crm_deals d ON d.id = m.deal_id"
            " JOIN ferryman_ledger l ON l.kind = 'messages' AND l.source_id = m.source_id::text"
        ).fetchall()
    return {int(row["source_id"]): row for row in rows}


def test_a_delta_reads_again_every_child_of_a_parent_it_wrote(db_url: str) -> None:
    """A message edited at the source moves its deal's updated_at: the delta updates the deal,
    reads every message of that deal again (bodies too) and updates the edited one; the
    messages of the other deals are not fetched again, and nothing else changes."""
    sizes = {**DATA, "organizations": 20, "people": 20, "deals": 12, "messages_per_deal": 4}
    kinds = [*KINDS, "messages"]
    with DemoCRM.start(seed=29, **sizes) as crm:
        crm.change()
        with credential(crm.api_key), engine_worker(db_url):
            assert _run(db_url, crm.url, "full", kinds=kinds)["state"] == "succeeded"
            before = _messages(db_url)
            per_deal: dict[int, list[int]] = {}
            for source_id, row in sorted(before.items()):
                per_deal.setdefault(row["deal"], []).append(source_id)
            thread = next(ids for _, ids in sorted(per_deal.items()) if len(ids) >= 2)
            edited = thread[-1]
            crm.change(update={"messages": [edited]})
            crm.reset_stats()
            done = _run(db_url, crm.url, "catch-up", "delta", kinds=kinds)
            bodies = crm.stats()["requests"].get("GET /v1/messages/{id}", {})
    assert done["state"] == "succeeded", done["error"]
    after = _messages(db_url)
    assert after[edited]["subject"] == before[edited]["subject"] + " (edit 1)"
    assert after[edited]["source_version"] != before[edited]["source_version"]
    assert {k: v for k, v in after.items() if k != edited} == {
        k: v for k, v in before.items() if k != edited
    }
    assert bodies == {"200": len(thread)}  # the deal's messages, and no other deal's
    assert len(per_deal) > 1


def test_a_window_written_twice_applies_its_change_once_and_never_an_older_one(
    crm: DemoCRM, db_url: str
) -> None:
    with credential(crm.api_key), engine_worker(db_url):
        assert _run(db_url, crm.url, "full")["state"] == "succeeded"
        with connect.connect(db_url) as conn:
            conn.execute(COUNT_UPDATES)
        crm.change(update={"people": [4]})
        with connect.connect(db_url) as conn:
            run = runs.admit(conn, _delta(crm.url, "d"))
            runs.cancel(conn, run["id"])
            provider = providers.of_run(run)
            writer = destinations.writer_for(run, provider, "people")
            with crm.client() as http:
                record = http.get("/v1/people", params={"start": 3, "limit": 1}).json()["data"][0]
            model = provider.kinds["people"].model.model_validate(record)
            params = {
                "rows": Jsonb([model.model_dump(mode="json")]),
                "workspace": "acme",
                "kind": "people",
                "run_id": run["id"],
                "deleted": [],
            }
            first = conn.execute(writer.rows_statement(), params).fetchone()
            second = conn.execute(writer.rows_statement(), params).fetchone()
            assert (first, second) == ({"written": 1, "matched": 0}, {"written": 0, "matched": 0})
            # a later version already imported: this record's change is older, never applied
            conn.execute(
                "UPDATE ferryman_ledger SET source_version = 't:2999-01-01T00:00:00.000000'"
                " WHERE kind = 'people' AND source_id = '4'"
            )
            conn.execute("UPDATE crm_people SET name = 'kept' WHERE source_id = 4")
            conn.execute("DELETE FROM app_updates")
            crm.change(update={"people": [4]})
            with crm.client() as http:
                record = http.get("/v1/people", params={"start": 3, "limit": 1}).json()["data"][0]
            newer = provider.kinds["people"].model.model_validate(record)
            params["rows"] = Jsonb([newer.model_dump(mode="json")])
            third = conn.execute(writer.rows_statement(), params).fetchone()
            name = conn.execute("SELECT name FROM crm_people WHERE source_id = 4").fetchone()
    assert record["name"].endswith("(edit 2)")
    assert third == {"written": 0, "matched": 0} and name == {"name": "kept"}
    assert _updates(db_url) == []


def test_a_delta_without_a_successful_run_before_it_is_refused(db_url: str) -> None:
    req = dataclasses.replace(request("http://127.0.0.1:1", "d", kinds=KINDS), mode="delta")
    with connect.connect(db_url) as conn, pytest.raises(ConfigurationError) as info:
        runs.admit(conn, req)
    assert "spec.mode: Delta reads what changed since the workspace's last successful run" in str(
        info.value
    )
    assert "run it with mode Full first" in str(info.value)
    assert state_of_nothing(db_url)


def state_of_nothing(db_url: str) -> bool:
    with connect.connect(db_url) as conn:
        return conn.execute("SELECT count(*) AS n FROM ferryman_runs").fetchone() == {"n": 0}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_delta_whose_worker_is_killed_mid_way_applies_each_change_once(db_url: str) -> None:
    sizes = {**DATA, "organizations": 40, "people": 2000, "deals": 0}
    with DemoCRM.start(seed=23, **sizes) as crm:
        crm.change()
        with credential(crm.api_key), engine_worker(db_url):
            assert _run(db_url, crm.url, "full")["state"] == "succeeded"
        with connect.connect(db_url) as conn:  # a slow trigger: a window takes about 60 ms
            conn.execute(COUNT_UPDATES.replace("BEGIN", "BEGIN PERFORM pg_sleep(0.003);"))
        crm.change(update={"people": list(range(1, 2001))})
        crm.configure(latency_ms=100)
        env = {credential_env_var(SECRET["name"], SECRET["key"]): crm.api_key}
        workers = [Subprocess(db_url, "migrations:2", env) for _ in range(2)]
        try:
            for worker in workers:
                worker.wait_ready()
            req = _delta(crm.url, "catch-up", page_size=200, window_size=20, max_in_flight=4)
            run_id = start_run(db_url, req)
            count = "SELECT count(*) FROM app_updates"
            wait_for(lambda: scalar(db_url, count) >= 300, 120, "the delta's first updates")
            workers.pop(0).kill()  # mid-way: its windows in flight roll back
            workers.append(Subprocess(db_url, "migrations:2", env))
            final = wait_finished(db_url, run_id, timeout=240)
        finally:
            for worker in workers:
                worker.stop()
    assert final["state"] == "succeeded", final["error"]
    assert extra_claims(db_url, run_id) >= 1  # the killed worker's tasks were taken again
    with connect.connect(db_url) as conn:
        twice = conn.execute(
            "SELECT row_id FROM app_updates GROUP BY row_id HAVING count(*) > 1"
        ).fetchall()
        updated = conn.execute("SELECT count(DISTINCT row_id) AS n FROM app_updates").fetchone()
        stale = conn.execute(
            "SELECT count(*) AS n FROM ferryman_ledger"
            " WHERE kind = 'people' AND source_version = %s",
            (UNCHANGED,),
        ).fetchone()
    assert twice == [] and updated == {"n": 2000} and stale == {"n": 0}
