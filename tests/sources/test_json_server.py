"""json-server 0.17.4 from hack/sources: db.json written from the seed before it starts, every
record readable through its own API exactly once by page (Link header), by offset and by keyset."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from source_servers import ORGANIZATIONS, SEED, Running, StartServer, crm

pytestmark = pytest.mark.slow
NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


@pytest.fixture(scope="module")
def dataset() -> crm.Dataset:
    return crm.generate(SEED, ORGANIZATIONS)


def expected_record(record: crm.Record) -> dict[str, Any]:
    """The record as it was generated, with json-server's integer id and `<parent>Id` link."""
    links = {"people": "organizationId", "deals": "personId", "notes": "dealId"}
    body: dict[str, Any] = {"id": record.seq, **record.fields}
    if record.parent is not None:
        body[links[record.collection]] = record.parent
    return body


def test_every_seeded_record_is_served_once_following_link_next(
    json_server: Running, dataset: crm.Dataset
) -> None:
    assert dataset.total() >= 50_000
    assert json_server.counts == dataset.counts()
    with httpx.Client(timeout=60.0) as http:
        for name in crm.COLLECTIONS:
            served: list[dict[str, Any]] = []
            url: str | None = f"{json_server.url}/{name}?_page=1&_limit=1000"
            while url:
                response = http.get(url)
                assert int(response.headers["X-Total-Count"]) == len(dataset.records[name])
                served += response.json()
                found = NEXT.search(response.headers.get("Link", ""))
                url = found.group(1) if found else None
            assert served == [expected_record(r) for r in dataset.records[name]], name


def test_offset_and_keyset_walks_see_every_note_once(
    json_server: Running, dataset: crm.Dataset
) -> None:
    total = len(dataset.records["notes"])
    with httpx.Client(base_url=json_server.url, timeout=60.0) as http:
        by_offset: list[int] = []
        while page := http.get("/notes", params={"_start": len(by_offset), "_limit": 2000}).json():
            by_offset += [note["id"] for note in page]
        by_keyset: list[int] = []
        while True:
            params = {
                "id_gte": by_keyset[-1] + 1 if by_keyset else 1,
                "_sort": "id",
                "_limit": 2000,
            }
            page = http.get("/notes", params=params).json()
            if not page:
                break
            by_keyset += [note["id"] for note in page]
    assert by_offset == by_keyset == list(range(1, total + 1))


def test_nested_route_lists_a_parents_children(json_server: Running, dataset: crm.Dataset) -> None:
    expected = [expected_record(r) for r in dataset.records["deals"] if r.parent == 3]
    response = httpx.get(f"{json_server.url}/people/3/deals")
    assert response.json() == expected


def test_a_tests_own_server_takes_writes_the_shared_one_never_sees(
    json_server: Running, start_json_server: StartServer
) -> None:
    own = start_json_server(seed=SEED, organizations=40)
    created = httpx.post(f"{own.url}/notes", json={"dealId": 1, "body": "added mid-walk"})
    assert created.status_code == 201
    counts = httpx.get(f"{own.url}/notes", params={"_page": 1, "_limit": 1}).headers
    assert int(counts["X-Total-Count"]) == crm.generate(SEED, 40).counts()["notes"] + 1
    shared = httpx.get(f"{json_server.url}/notes", params={"_page": 1, "_limit": 1}).headers
    assert int(shared["X-Total-Count"]) == json_server.counts["notes"]
