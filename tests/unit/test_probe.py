"""What one response suggests where no real server here answers that way (a next URL, a cursor,
nothing): the pure reading of ``providers.probe``; the real servers' answers are read in
tests/sources/test_probe.py."""

from __future__ import annotations

from ferryman_worker.providers import probe


def test_a_next_url_in_the_body_suggests_next_url_paging() -> None:
    body = {"results": [{"id": 1}], "links": {"next": "https://api.example.com/v1/x?page=2"}}
    best = probe.suggest("https://api.example.com/v1/x", {}, body)[0]
    assert (best.records, best.pagination) == (
        "results",
        {"style": "next_url", "next": "links.next"},
    )


def test_a_cursor_with_a_has_more_flag_suggests_cursor_paging() -> None:
    body = {"data": [{"id": "a"}], "has_more": True, "meta": {"next_cursor": "eyJpZCI6ImEifQ"}}
    best = probe.suggest("https://api.example.com/v1/x?limit=2", {}, body)[0]
    assert best.pagination == {
        "style": "cursor",
        "next": "meta.next_cursor",
        "param": "cursor",
        "sizeParam": "limit",
        "stop": {"more": "has_more"},
    }


def test_a_response_without_paging_suggests_a_single_page_and_says_why() -> None:
    [only] = probe.suggest("https://api.example.com/v1/x", {}, [{"id": 1}, {"id": 2}])
    assert only.pagination == {"style": "single"} and only.records == ""
    assert "nothing in the response looks like paging" in only.why
