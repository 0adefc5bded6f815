"""A collection's search, ``POST /v1/<kind>/search``: the position and the filter in a JSON body,
the next page named in the answer (HubSpot's CRM search shape), charged like a listing."""

from typing import Any

import httpx
import pytest
from tests.democrm.conftest import StartDemoCRM
from tests.democrm.server_fixture import DemoCRM


def _walk(http: httpx.Client, kind: str, **body: Any) -> list[dict[str, Any]]:
    """Every record of the search, following ``paging.next.after`` to the end."""
    records: list[dict[str, Any]] = []
    while True:
        page = http.post(f"/v1/{kind}/search", json=body)
        assert page.status_code == 200, page.text
        records += page.json()["results"]
        following = page.json().get("paging")
        if following is None:
            return records
        after = following["next"]["after"]
        assert int(after) > int(body.get("after", 0)), f"the search repeats after {after}"
        body = {**body, "after": after}


@pytest.mark.parametrize("kind", ["organizations", "people", "deals"])
def test_a_search_walks_every_record_once_in_id_order(shared_democrm: DemoCRM, kind: str) -> None:
    with shared_democrm.client() as http:
        found = _walk(http, kind, limit=7)
        listed = http.get(f"/v1/{kind}", params={"paging": "all"}).json()["data"]
    assert found == listed  # the same records, malformed ones too
    assert [r["id"] for r in found] == shared_democrm.truth()[kind]["ids"]


def test_a_page_names_the_next_after_and_the_last_page_names_none(
    shared_democrm: DemoCRM,
) -> None:
    with shared_democrm.client() as http:
        first = http.post("/v1/organizations/search", json={"limit": 50}).json()
        second = http.post("/v1/organizations/search", json={"after": 50, "limit": 50}).json()
        last = http.post("/v1/organizations/search", json={"after": "100", "limit": 50}).json()
    assert first["total"] == 120 and [r["id"] for r in first["results"]] == list(range(1, 51))
    assert first["paging"] == {"next": {"after": "50"}}
    assert [r["id"] for r in second["results"]] == list(range(51, 101))
    assert [r["id"] for r in last["results"]] == list(range(101, 121))
    assert "paging" not in last


def test_a_filter_keeps_the_records_whose_fields_equal_it(shared_democrm: DemoCRM) -> None:
    with shared_democrm.client() as http:
        won = _walk(http, "deals", limit=3, filter={"status": "won"})
        total = http.post("/v1/deals/search", json={"filter": {"status": "won"}}).json()["total"]
        every = http.get("/v1/deals", params={"paging": "all"}).json()["data"]
    assert won == [deal for deal in every if deal["status"] == "won"]
    assert 0 < total == len(won) < len(every)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[1, 2]", "the body must be a JSON object, got list"),
        (b"{after: 1}", "the body must be a JSON object"),
        (b'{"limit": 0}', "limit must be an integer between 1 and 500, got 0"),
        (b'{"limit": "10"}', "limit must be an integer between 1 and 500, got '10'"),
        (b'{"after": "-3"}', "after must be a record id"),
        (b'{"after": true}', "after must be a record id"),
        (b'{"sorts": []}', "unknown field(s) sorts: a search takes after, limit, filter"),
        (b'{"filter": []}', "filter must be an object of field: value, got list"),
        (b'{"filter": {"colour": "red"}}', "organizations have no field 'colour'"),
        (b'{"filter": {"name": {"eq": "x"}}}', "filter.name: give a string, number or boolean"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field_and_charges_nothing(
    start_democrm: StartDemoCRM, body: bytes, message: str
) -> None:
    crm = start_democrm(organizations=10, budget_capacity=20, budget_refill_per_s=0.001)
    with crm.client() as http:
        refused = http.post("/v1/organizations/search", content=body)
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["code"] == "bad_request" and error["message"].startswith("search body: ")
        assert message in error["message"]
        assert http.post("/v1/organizations/search").status_code == 200  # the budget was full


def test_a_search_is_charged_like_a_listing_and_counted_under_its_endpoint(
    start_democrm: StartDemoCRM,
) -> None:
    crm = start_democrm(organizations=10, budget_capacity=40, budget_refill_per_s=0.001)
    with crm.client() as http:
        answers = [http.post("/v1/people/search", json={}).status_code for _ in range(3)]
        assert http.get("/v1/people/search").status_code == 405
    assert answers == [200, 200, 429]  # 20 tokens a call, as a listing
    assert crm.stats()["requests"]["POST /v1/people/search"] == {"200": 2, "429": 1}


def test_a_search_leaves_out_records_deleted_by_drift_and_changes(
    start_democrm: StartDemoCRM,
) -> None:
    crm = start_democrm(organizations=12, people=0, deals=0, malformed_rate=0)
    crm.drift(kind="organizations", delete=[2, 5])
    with crm.client() as http:
        assert [r["id"] for r in _walk(http, "organizations", limit=4)] == [
            1, 3, 4, *range(6, 13)]  # fmt: skip
        crm.drift(kind="organizations", create=[2, 5])
        crm.change(delete={"organizations": [7]}, add={"organizations": 1})
        walked = _walk(http, "organizations", limit=5)
    assert [r["id"] for r in walked] == [*range(1, 7), *range(8, 14)]
    assert all("updated_at" in r for r in walked)  # changes on: each record as it is now
