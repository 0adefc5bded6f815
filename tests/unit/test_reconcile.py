"""The reconciliation's arithmetic (``engine.reconcile``) on the barrier's aggregate rows, and
the totals a page states (``providers.pagination``), without a database."""

from __future__ import annotations

from pydantic import BaseModel

from ferryman_worker.engine import paging, reconcile
from ferryman_worker.providers import Kind, Reply
from ferryman_worker.providers.pagination import Cursor, LinkHeader, Offset, PageNumber, Stops


class Record(BaseModel):
    id: int


LINKED = Kind("companies", Record, pagination=LinkHeader(Stops(total_header="X-Total-Count")))


def part(listed: int, low: int | None, high: int | None = None, *rules: str) -> reconcile.Part:
    pages = 3
    high = low if high is None else high
    return reconcile.Part(pages, pages, listed, low, high, rules or ("no next token",), 0)


def test_a_kind_whose_source_states_no_total_is_unverified() -> None:
    kind = Kind("companies", Record, pagination=Offset())
    found = reconcile.listing(kind, [part(1000, None)])
    assert (found.verdict, found.listed, found.total) == ("unverified", 1000, None)
    assert found.note == "the source states no total"


def test_a_declared_total_in_no_answer_is_unverified_and_says_so() -> None:
    found = reconcile.listing(LINKED, [part(1000, None)])
    assert found.verdict == "unverified" and "X-Total-Count" in found.note


def test_a_listing_short_of_its_total_names_the_counts_the_rule_and_the_fix() -> None:
    found = reconcile.listing(LINKED, [part(1000, 20000)])
    assert found.failed and (found.listed, found.total) == (1000, 20000)
    assert found.note.startswith(
        "companies: listed 1,000 of the 20,000 records the source states (X-Total-Count), short"
        " by 19,000; the walk ended on no next token: the answers named no next page"
    )
    assert "request.query" in found.note


def test_a_shortfall_within_the_totals_change_during_the_walk_is_drift() -> None:
    found = reconcile.listing(LINKED, [part(590, 595, 600)])
    assert found.verdict == "reconciled"
    assert "5 fewer, within the total's change during the walk" in found.note


def test_more_listed_than_the_total_is_explained_as_listed_twice_or_deleted() -> None:
    found = reconcile.listing(LINKED, [part(605, 600)])
    assert found.verdict == "reconciled" and "5 more listed than the total" in found.note


def test_each_part_of_a_split_is_reconciled_with_its_own_total() -> None:
    found = reconcile.listing(LINKED, [part(100, 100), part(40, 90, 90, "a short page")])
    assert found.failed and "companies (part 1 of its split): listed 40 of the 90" in found.note
    assert "maxPageSize" in found.note  # a short page: the source serves fewer than asked for


def test_pages_listed_before_counts_were_kept_leave_the_kind_unverified() -> None:
    counted = reconcile.Part(3, 2, 200, 300, 300, ("no next token",), 0)
    assert reconcile.listing(LINKED, [counted]).verdict == "unverified"


def test_a_tree_parent_short_of_its_total_is_named_and_within_it_is_not() -> None:
    kind = Kind("notes", Record, walk="tree", parent="deals", pagination=Cursor(Stops(total="n")))
    assert reconcile.parent(kind, "7", 3, [3], "no next token") == ""
    assert reconcile.parent(kind, "7", 3, [], "no next token") == ""  # no total stated
    short = reconcile.parent(kind, "7", 3, [10, 10], "no next token")
    assert short.startswith("notes of deals 7: listed 3 of the 10 the source states (n)")


def test_a_number_of_pages_proves_at_least_all_but_the_last_page_full() -> None:
    paging = PageNumber(total_pages="pages")
    reply = Reply(200, {}, {"pages": 6})
    assert paging.stated_total(reply, [{}] * 100, token=2) == 501
    assert paging.declared_total == "pages" and paging.least_only
    assert paging.stated_total(Reply(200, {}, {}), [{}] * 100, token=2) is None
    # the last page, or a stripe's page past it, says nothing of the other pages' length
    assert paging.stated_total(Reply(200, {}, {"pages": 6}), [{}] * 3, token=6) is None
    assert paging.stated_total(Reply(200, {}, {"pages": 6}), [], token=7) is None
    # the only page of a listing is the whole of it
    assert paging.stated_total(Reply(200, {}, {"pages": 1}), [{}] * 3, token=1) == 3
    counted = PageNumber(Stops(total="items"), total_pages="pages")
    assert not counted.least_only
    assert counted.stated_total(Reply(200, {}, {"items": 540, "pages": 6}), [], token=7) == 540


def test_a_least_bound_reconciles_a_longer_listing_without_calling_it_drift() -> None:
    kind = Kind("organizations", Record, pagination=PageNumber(total_pages="totalPages"))
    found = reconcile.listing(kind, [reconcile.Part(2, 2, 2000, 1001, 1001, ("the last page",), 0)])
    assert found.verdict == "reconciled"
    assert found.note == (
        "listed 2,000, at least the 1,001 the source's number of pages (totalPages) implies"
    )
    short = reconcile.listing(kind, [reconcile.Part(1, 1, 1000, 1001, 1001, ("an empty page",), 0)])
    assert short.verdict == "short"


def test_a_remaining_count_states_the_total_as_the_chain_listed_so_far_plus_it() -> None:
    """The kube-apiserver's chunks: each but the last says how many items follow it."""
    kind = Kind(
        "configmaps",
        Record,
        pagination=Cursor(Stops(remaining="metadata.remainingItemCount"), next_cursor="c"),
    )
    assert kind.pagination.declared_total == "metadata.remainingItemCount"
    at = paging.Position.start(kind)
    chunks = [({"c": "t1", "metadata": {"remainingItemCount": 11}}, 10),
              ({"c": "t2", "metadata": {"remainingItemCount": 1}}, 10),
              ({"metadata": {}}, 1)]  # fmt: skip
    totals = []
    for body, n in chunks:
        reply, records = Reply(200, {}, body), [{"id": len(totals) * 10 + i} for i in range(n)]
        following = paging.following(kind, at, reply, records, 10)
        listed = paging.Listed.of(kind, at, reply, records, 10, following)
        totals.append(listed.total)
        if following is not None:
            at = paging.Position.of(following.cursor())  # as the next page's task reads it
    assert totals == [21, 21, None]  # the last chunk states nothing: it has no remaining count
    assert reconcile.listing(kind, [part(21, 21)]).verdict == "reconciled"
    stopped = reconcile.listing(kind, [part(20, 21, 21, "the declared maximum of 2 pages")])
    assert stopped.verdict == "short" and "stop.maxPages" in stopped.note
