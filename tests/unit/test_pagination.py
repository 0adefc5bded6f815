"""Pagination styles: the request for a page, the next page's token, the stop rules, and the
guard that fails a listing which loops."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from stub_provider import StubProvider

from ferryman_worker.engine import paging
from ferryman_worker.providers import Kind, Reply, Request, ResponsePolicy, Split
from ferryman_worker.providers.pagination import (
    Cursor,
    Keyset,
    LinkHeader,
    NextUrl,
    Offset,
    PageNumber,
    Single,
    Stops,
    link_next,
)

BASE = Request("/items", {"sort": "id"}, cost=3)


class _Item(BaseModel):
    id: int


def _reply(body: Any = None, **headers: str) -> Reply:
    return Reply(200, httpx.Headers({k.replace("_", "-"): v for k, v in headers.items()}), body)


def _records(n: int, first: int = 1) -> list[dict[str, Any]]:
    return [{"id": i} for i in range(first, first + n)]


def test_offset_pages_are_known_ahead_and_a_short_page_ends_the_listing() -> None:
    style = Offset(offset="start", size="limit")
    assert style.striped and style.first() == 0
    assert style.apply(BASE, 40, 20).params == {"sort": "id", "start": 40, "limit": 20}
    assert style.ahead(40, 4, 20) == 120
    assert style.next(40, _reply(), _records(20), 20, 2) == 60
    assert style.next(40, _reply(), _records(19), 20, 2) is None
    assert style.stop(40, _reply(), [], 20, 2) == "an empty page"


def test_a_total_ends_the_listing_when_reached_in_the_body_or_a_header() -> None:
    body = Offset(Stops(total="meta.total"))
    assert body.stop(40, _reply({"meta": {"total": 60}}), _records(20), 20, 2) == (
        "the total (60) is reached"
    )
    assert body.next(20, _reply({"meta": {"total": 60}}), _records(20), 20, 1) == 40
    header = Offset(Stops(total_header="X-Total-Count"))
    assert header.next(40, _reply(X_Total_Count="60"), _records(20), 20, 2) is None


def test_page_numbers_stop_at_the_total_pages_the_body_names() -> None:
    style = PageNumber(page="page", size="perPage", total_pages="totalPages")
    assert style.first() == 1 and style.ahead(1, 3, 50) == 4
    assert style.apply(BASE, 2, 50).params == {"sort": "id", "page": 2, "perPage": 50}
    assert style.next(2, _reply({"totalPages": 3}), _records(50), 50, 1) == 3
    assert style.next(3, _reply({"totalPages": 3}), _records(50), 50, 2) is None


def test_a_has_more_field_false_ends_the_listing() -> None:
    style = Offset(Stops(more="pagination.more"), offset="start")
    full = _records(10)
    assert style.next(0, _reply({"pagination": {"more": True}}), full, 20, 0) == 10
    assert style.next(0, _reply({"pagination": {"more": False}}), full, 20, 0) is None


def test_a_next_url_is_requested_as_given_and_its_absence_ends_the_listing() -> None:
    style = NextUrl(next_url="links.next", size="limit")
    assert style.apply(BASE, None, 25).params == {"sort": "id", "limit": 25}
    url = "https://api.example.com/items?page=2&limit=25"
    following = style.apply(BASE, url, 25)
    assert (following.path, following.params, following.cost) == (url, {}, 3)
    assert style.next(None, _reply({"links": {"next": url}}), _records(25), 25, 0) == url
    assert style.next(url, _reply({"links": {"next": None}}), _records(25), 25, 1) is None


def test_the_link_header_names_the_next_page_among_other_relations() -> None:
    header = (
        '<http://h/items?_page=1>; rel="first", <http://h/items?_page=3>; rel="next",'
        ' <http://h/items?_page=9>; rel="last"'
    )
    assert link_next(header) == "http://h/items?_page=3"
    assert link_next('<http://h/a>; rel="prev next"') == "http://h/a"
    assert link_next('<http://h/a>; rel="prev"') is None
    style = LinkHeader(size="_limit")
    assert style.next(None, _reply(link=header), _records(5), 5, 0) == "http://h/items?_page=3"
    assert style.next(None, _reply(link='<http://h/x>; rel="last"'), _records(5), 5, 0) is None


@pytest.mark.parametrize(
    ("send", "where"),
    [("query", "params"), ("body", "json"), ("header", "headers")],
)
def test_an_opaque_cursor_goes_back_where_the_api_wants_it(send: Any, where: str) -> None:
    style = Cursor(param="after", next_cursor="paging.next.after", send=send)
    token = {"opaque": ["any", "json", 1]} if send == "body" else "c2VjcmV0"
    sent = getattr(style.apply(BASE, token, 10), where)
    assert sent["after"] == token
    assert style.apply(BASE, None, 10) == BASE  # the first page: no cursor
    page = _reply({"paging": {"next": {"after": "abc"}}})
    assert style.next(token, page, _records(10), 10, 0) == "abc"
    assert style.next(token, _reply({"paging": {}}), _records(10), 10, 0) is None


def test_a_cursor_in_a_header() -> None:
    style = Cursor(param="cursor", next_header="X-Next-Cursor")
    assert style.next(None, _reply(X_Next_Cursor="n2"), _records(3), 3, 0) == "n2"
    assert style.next("n2", _reply(), _records(3), 3, 1) is None


def test_keyset_asks_for_records_after_the_last_key() -> None:
    style = Keyset(key="id", param="filter", template="id>'{key}'", size="perPage")
    assert style.apply(BASE, None, 50).params == {"sort": "id", "perPage": 50}
    assert style.apply(BASE, "k7", 50).params["filter"] == "id>'k7'"
    assert style.next(None, _reply(), _records(50, 7), 50, 0) == 56
    assert style.next(56, _reply(), _records(10, 57), 50, 1) is None  # short page


def test_a_single_page_is_the_whole_listing_and_a_maximum_ends_any() -> None:
    assert Single().next(None, _reply(), _records(500), 10, 0) is None
    capped = Cursor(Stops(max_pages=2))
    assert capped.next("a", _reply({"next_cursor": "b"}), _records(3), 3, 0) == "b"
    assert capped.next("b", _reply({"next_cursor": "c"}), _records(3), 3, 1) is None


def _kind(pagination: Any, split: Split | None = None) -> Kind:
    return Kind("items", _Item, pagination=pagination, split=split or Split())


def test_a_repeated_cursor_fails_the_listing_naming_the_kind_and_the_token() -> None:
    kind = _kind(Cursor())
    at = paging.Position.start(kind)
    at = paging.following(kind, at, _reply({"next_cursor": "A"}), _records(2), 2)
    assert at is not None
    at = paging.following(kind, at, _reply({"next_cursor": "B"}), _records(2, 3), 2)
    assert at is not None
    with pytest.raises(paging.PagingLoop, match=r'items: the source gave the token "A" again'):
        paging.following(kind, at, _reply({"next_cursor": "A"}), _records(2, 5), 2)


def test_a_token_that_names_itself_fails_at_once() -> None:
    kind = _kind(Cursor())
    at = paging.Position(0, 3, "same")
    with pytest.raises(paging.PagingLoop, match="items"):
        paging.following(kind, at, _reply({"next_cursor": "same"}), _records(2), 2)


def test_an_api_that_ignores_the_offset_fails_on_its_identical_pages() -> None:
    kind = _kind(Offset())
    page = _records(10)
    at = paging.following(kind, paging.Position.start(kind), _reply(), page, 10, stripes=2)
    assert at is not None and (at.page, at.token) == (2, 20)
    restored = paging.Position.of(at.cursor())  # checkpointed as the next task's cursor
    with pytest.raises(paging.PagingLoop, match="repeats the page before it"):
        paging.following(kind, restored, _reply(), page, 10, stripes=2)


def test_a_page_that_begins_with_the_last_record_before_it_is_no_loop() -> None:
    kind = _kind(Offset())  # an inclusive keyset (id_gte) lists the boundary record twice
    first = _records(10)
    at = paging.following(kind, paging.Position.start(kind), _reply(), first, 10)
    assert at is not None
    overlapping = paging.following(kind, at, _reply(), _records(10, 10), 10)
    assert overlapping is not None and overlapping.page == 2


def test_stripes_walk_every_stripe_pages_apart_and_stop_at_the_declared_maximum() -> None:
    kind = _kind(Offset(Stops(short_page=True, max_pages=5)))
    starts = [paging.Position.start(kind, 0, stripe, 10) for stripe in range(3)]
    assert [(at.page, at.token) for at in starts] == [(0, 0), (1, 10), (2, 20)]
    second = paging.following(kind, starts[1], _reply(), _records(10), 10, stripes=3)
    assert second is not None and (second.page, second.token) == (4, 40)
    assert paging.following(kind, starts[2], _reply(), _records(10, 21), 10, stripes=3) is None


def test_each_part_of_a_split_adds_its_parameters_and_has_its_own_key() -> None:
    split = Split.ranges("updated_after", "updated_before", ["2024", "2025", "2026"])
    assert split.parts == (
        {"updated_after": "2024", "updated_before": "2025"},
        {"updated_after": "2025", "updated_before": "2026"},
    )
    kind = _kind(Cursor(param="cursor"), split)

    class _Provider(StubProvider):
        def listing(self, kind: str, parent: Any) -> Request:
            return BASE

    at = paging.Position(1, 4, "tok")
    sent = paging.request(_Provider(), kind, at, 10)
    assert sent.params == {
        "sort": "id",
        "updated_after": "2025",
        "updated_before": "2026",
        "cursor": "tok",
    }
    assert at.key(kind) == "items:1:4"
    assert paging.Position(0, 4, 40).key(_kind(Offset())) == "items:4"
    assert Split.values("status", ["open", "won"]).parts == ({"status": "open"}, {"status": "won"})


def test_the_response_policy_says_what_a_status_means() -> None:
    default = ResponsePolicy()
    assert [default.action(s) for s in (200, 204, 404, 410, 408, 429, 500, 503, 400, 401)] == [
        "ok", "ok", "gone", "gone", "retry", "rate_limited", "retry", "retry", "fail", "fail",
    ]  # fmt: skip
    strict = ResponsePolicy(gone=frozenset(), retry=frozenset({409}), fail=frozenset({503}))
    assert [strict.action(s) for s in (404, 409, 503, 502)] == ["fail", "retry", "fail", "retry"]


def test_a_listing_past_the_default_bound_fails_naming_the_field_to_declare() -> None:
    kind = _kind(Cursor())
    at: paging.Position | None = paging.Position.start(kind)
    for n in range(2):
        assert at is not None
        at = paging.following(
            kind, at, _reply({"next_cursor": f"c{n}"}), _records(2, n * 2), 2, bound=3
        )
    assert at is not None and at.page == 2
    with pytest.raises(paging.PagingLimit) as caught:
        paging.following(kind, at, _reply({"next_cursor": "c9"}), _records(2, 9), 2, bound=3)
    assert "goes on past 3 pages" in str(caught.value)
    assert "kinds.items.pagination.maxPages" in str(caught.value)
    assert not caught.value.retryable
    declared = _kind(Cursor(Stops(max_pages=5)))
    start = paging.Position(0, 2, "c1")
    assert paging.following(declared, start, _reply({"next_cursor": "c2"}), _records(2), 2, bound=3)
