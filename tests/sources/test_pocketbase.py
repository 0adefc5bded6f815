"""PocketBase from hack/sources: built, seeded from the seed, every record readable through its own
API exactly once, its limiter on for regular users only."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from source_servers import LIMIT, ORGANIZATIONS, SEED, Running, crm
from source_servers import pb as pocketbase_module

pytestmark = pytest.mark.slow
SERVER_FIELDS = ("collectionId", "collectionName", "updated")


@pytest.fixture(scope="module")
def dataset() -> crm.Dataset:
    return crm.generate(SEED, ORGANIZATIONS)


def client(server: Running, token: str = "superuser") -> httpx.Client:
    headers = {"Authorization": server.tokens[token]}
    return httpx.Client(base_url=server.url, headers=headers, timeout=60.0)


def expected_body(record: crm.Record) -> dict[str, Any]:
    """The record as it was generated: its id spelled the PocketBase way, its parent's too."""
    body: dict[str, Any] = {"id": pocketbase_module.record_id(record.collection, record.seq)}
    if record.parent is not None:
        parent = crm.PARENT[record.collection]
        body[crm.PARENT_FIELD[record.collection]] = pocketbase_module.record_id(
            parent, record.parent
        )
    return {**body, **record.fields}


def walk_pages(http: httpx.Client, collection: str) -> tuple[list[dict[str, Any]], int]:
    """Every record by page number (perPage 1000, sorted by id), and the total the server gave."""
    records: list[dict[str, Any]] = []
    page, total = 1, -1
    while True:
        params = {"page": page, "perPage": 1000, "sort": "id"}
        body = http.get(f"/api/collections/{collection}/records", params=params).json()
        total = body["totalItems"]
        records += body["items"]
        if page >= body["totalPages"]:
            return records, total
        page += 1


def test_every_seeded_record_is_served_once_with_its_parent(
    pocketbase: Running, dataset: crm.Dataset
) -> None:
    assert dataset.total() >= 50_000
    assert pocketbase.counts == dataset.counts()
    with client(pocketbase) as http:
        for name in crm.COLLECTIONS:
            served, total = walk_pages(http, name)
            expected = [expected_body(record) for record in dataset.records[name]]
            assert total == len(expected), name
            stripped = [{k: v for k, v in r.items() if k not in SERVER_FIELDS} for r in served]
            assert stripped == expected, name


def test_keyset_by_filter_and_sort_walks_every_organization(
    pocketbase: Running, dataset: crm.Dataset
) -> None:
    seen: list[str] = []
    with client(pocketbase) as http:
        while True:
            params: dict[str, Any] = {"perPage": 500, "sort": "id", "skipTotal": 1}
            if seen:
                params["filter"] = f'id > "{seen[-1]}"'
            items = http.get("/api/collections/organizations/records", params=params).json()
            if not items["items"]:
                break
            seen += [item["id"] for item in items["items"]]
    assert seen == [pocketbase_module.record_id("organizations", n) for n in range(1, 2001)]
    assert len(seen) == dataset.counts()["organizations"]


def test_children_of_a_parent_are_listed_by_relation_filter(
    pocketbase: Running, dataset: crm.Dataset
) -> None:
    parent = pocketbase_module.record_id("organizations", 7)
    expected = [r for r in dataset.records["people"] if r.parent == 7]
    with client(pocketbase) as http:
        params = {"filter": f'organization = "{parent}"', "perPage": 100}
        body = http.get("/api/collections/people/records", params=params).json()
    assert body["totalItems"] == len(expected) > 0
    assert {item["organization"] for item in body["items"]} == {parent}


def test_the_limiter_answers_429_without_retry_after_to_a_user_and_never_to_the_superuser(
    pocketbase_limited: Running,
) -> None:
    path = "/api/collections/deals/records"
    with client(pocketbase_limited, "user") as http:
        codes = [http.get(path, params={"perPage": 1}).status_code for _ in range(LIMIT.requests)]
        refused = http.get(path, params={"perPage": 1})
    assert codes == [200] * LIMIT.requests
    assert refused.status_code == 429
    assert "Retry-After" not in refused.headers
    with client(pocketbase_limited) as http:
        codes = [
            http.get(path, params={"perPage": 1}).status_code for _ in range(3 * LIMIT.requests)
        ]
    assert codes == [200] * (3 * LIMIT.requests)


def test_listing_needs_a_token(pocketbase: Running) -> None:
    response = httpx.get(f"{pocketbase.url}/api/collections/notes/records")
    assert response.status_code == 200
    assert response.json()["totalItems"] == 0  # the rule filters every record out for a guest
