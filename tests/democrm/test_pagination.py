"""Pagination in every style: every id exactly once, page shapes, and parameter validation."""

from collections import Counter
from typing import Any

import httpx
import pytest
from tests.democrm import walker
from tests.democrm.conftest import StartDemoCRM
from tests.democrm.server_fixture import DemoCRM

KINDS = ("organizations", "people", "deals")


def walk(http: httpx.Client, path: str, limit: int = 500) -> list[dict[str, object]]:
    """Every record of a listing, following ``next_start`` until ``more`` is false."""
    records: list[dict[str, object]] = []
    start: int | None = 0
    while start is not None:
        body = http.get(path, params={"start": start, "limit": limit}).raise_for_status().json()
        page = body["pagination"]
        assert (page["start"], page["limit"]) == (start, limit)
        assert len(body["data"]) == limit or not page["more"]
        assert page["next_start"] == (start + len(body["data"]) if page["more"] else None)
        records += body["data"]
        start = page["next_start"]
    return records


@pytest.mark.parametrize("size", [0, 1, 499, 500, 501, 2000])
def test_pages_of_500_cover_every_id_exactly_once(start_democrm: StartDemoCRM, size: int) -> None:
    people, deals = min(size, 501), min(size, 499)
    crm = start_democrm(organizations=size, people=people, deals=deals, malformed_rate=0.02)
    truth = crm.truth()
    with crm.client() as http:
        for kind in KINDS:
            ids = [record["id"] for record in walk(http, f"/v1/{kind}")]
            assert Counter(ids) == Counter(truth[kind]["ids"]), kind
            assert len(ids) == truth[kind]["count"] == len(set(ids))
    assert truth["organizations"]["count"] == size


def test_start_beyond_the_end_is_an_empty_last_page(shared_democrm: DemoCRM) -> None:
    with shared_democrm.client() as http:
        body = http.get("/v1/people", params={"start": 10_000, "limit": 5}).json()
    expected = {"start": 10_000, "limit": 5, "more": False, "next_start": None}
    assert body == {"data": [], "pagination": expected}


def test_limit_defaults_to_100(shared_democrm: DemoCRM) -> None:
    with shared_democrm.client() as http:
        body = http.get("/v1/organizations").json()
    assert len(body["data"]) == 100
    assert body["pagination"] == {"start": 0, "limit": 100, "more": True, "next_start": 100}


@pytest.mark.parametrize("limit", ["0", "501", "-1", "ten", "1.5", "", "+5"])
def test_a_bad_limit_is_a_400_with_a_json_error(shared_democrm: DemoCRM, limit: str) -> None:
    with shared_democrm.client() as http:
        response = http.get(f"/v1/organizations?limit={limit}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_request"
    assert "limit" in response.json()["error"]["message"]


def test_a_bad_start_is_a_400(shared_democrm: DemoCRM) -> None:
    with shared_democrm.client() as http:
        response = http.get("/v1/deals", params={"start": "-3"})
    assert response.status_code == 400
    assert "start" in response.json()["error"]["message"]


def test_a_page_deep_into_a_huge_dataset_is_served_without_precomputation(
    start_democrm: StartDemoCRM,
) -> None:
    crm = start_democrm(organizations=50_000_000, people=0, deals=0)
    with crm.client() as http:
        body = http.get("/v1/organizations", params={"start": 49_999_990, "limit": 500}).json()
    assert [r["id"] for r in body["data"]] == list(range(49_999_991, 50_000_001))
    assert body["pagination"]["more"] is False


@pytest.mark.parametrize("style", walker.STYLES)
def test_every_paging_style_lists_every_id_once_in_order(
    shared_democrm: DemoCRM, style: str
) -> None:
    """Offset, page number, Link header, next URL, cursor, keyset and all at once: the same
    records, for the listed kinds and a deal's messages."""
    truth = shared_democrm.truth()
    with shared_democrm.client() as http:
        for kind in KINDS:
            assert walker.walk(http, f"/v1/{kind}", style, limit=7) == truth[kind]["ids"], kind
        deal = max(truth["deals"]["ids"], key=lambda d: len(messages_of(truth, d)))
        path = f"/v1/deals/{deal}/messages"
        assert walker.walk(http, path, style, limit=2) == messages_of(truth, deal)


def messages_of(truth: dict[str, Any], deal: int) -> list[int]:
    stride = 2 * truth["dataset"]["messages_per_deal"] + 1
    return [i for i in truth["messages"]["ids"] if (i - 1) // stride + 1 == deal]


def test_a_request_without_paging_is_answered_as_by_offset(shared_democrm: DemoCRM) -> None:
    with shared_democrm.client() as http:
        plain = http.get("/v1/people", params={"start": 5, "limit": 9})
        offset = http.get("/v1/people", params={"start": 5, "limit": 9, "paging": "offset"})
    assert plain.content == offset.content and "Link" not in plain.headers


def test_link_pages_name_the_next_and_the_total(shared_democrm: DemoCRM) -> None:
    with shared_democrm.client() as http:
        page = http.get("/v1/organizations", params={"paging": "link", "limit": 50})
        last = http.get("/v1/organizations", params={"paging": "link", "start": 100, "limit": 50})
    assert page.headers["X-Total-Count"] == "120" and list(page.json()) == ["data"]
    assert page.links["next"]["url"] == "/v1/organizations?paging=link&start=50&limit=50"
    assert len(last.json()["data"]) == 20 and "Link" not in last.headers


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"paging": "pages"}, "paging"),
        ({"paging": "cursor", "cursor": "not-a-cursor"}, "cursor"),
        ({"paging": "keyset", "after_id": "-1"}, "after_id"),
        ({"paging": "page", "page": "0"}, "page"),
        ({"paging": "next_url", "after": "x"}, "after"),
    ],
)
def test_a_bad_paging_parameter_is_a_400_naming_it(
    shared_democrm: DemoCRM, query: dict[str, str], named: str
) -> None:
    with shared_democrm.client() as http:
        response = http.get("/v1/deals", params=query)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(named)


def test_a_cursor_of_another_listing_is_refused(shared_democrm: DemoCRM) -> None:
    with shared_democrm.client() as http:
        page = http.get("/v1/people", params={"paging": "cursor", "limit": 5}).json()
        cursor = page["pagination"]["next_cursor"]
        assert http.get("/v1/people", params={"paging": "cursor", "cursor": cursor}).is_success
        response = http.get("/v1/organizations", params={"paging": "cursor", "cursor": cursor})
    assert response.status_code == 400 and "cursor" in response.json()["error"]["message"]


def test_a_looping_pagination_repeats_the_cursor_or_the_first_page(democrm: DemoCRM) -> None:
    with democrm.client() as http:
        first = http.get("/v1/people", params={"paging": "cursor", "limit": 10}).json()
        cursor = first["pagination"]["next_cursor"]
        democrm.configure(paging_loop="token")
        again = http.get("/v1/people", params={"paging": "cursor", "limit": 10, "cursor": cursor})
        assert again.json()["pagination"]["next_cursor"] == cursor  # given back, not the next
        assert again.json()["data"][0]["id"] == 11
        assert http.get("/v1/people", params={"start": 20}).json()["data"][0]["id"] == 21
        democrm.configure(paging_loop="page")
        for params in ({"start": 20, "limit": 10}, {"paging": "page", "page": 3, "per_page": 10}):
            body = http.get("/v1/people", params=params).json()
            assert body["data"] == first["data"], params  # the first page, at every position
        body = http.get("/v1/people", params={"start": 20, "limit": 10}).json()
        assert body["pagination"]["next_start"] == 30  # the position asked, as if it were served
        democrm.configure(paging_loop="off")
        assert http.get("/v1/people", params={"start": 20}).json()["data"][0]["id"] == 21


def test_an_unknown_looping_pagination_is_refused(democrm: DemoCRM) -> None:
    with democrm.client() as http:
        refused = http.post("/_config", json={"paging_loop": "sometimes"})
    assert refused.status_code == 400
    assert "paging_loop must be one of off, token, page" in refused.text
