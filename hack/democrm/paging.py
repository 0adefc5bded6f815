"""How a listing is paged. By offset (``start``/``limit``) unless the request says ``paging=``:

| ``paging`` | parameters | the next page is named by |
|---|---|---|
| ``offset`` (default) | ``start``, ``limit`` | ``pagination.next_start`` (and ``more``) |
| ``page`` | ``page`` (from 1), ``per_page`` | ``pagination.total_pages`` / ``total_items`` |
| ``link`` | ``start``, ``limit`` | ``Link: <...>; rel="next"`` (RFC 8288), ``X-Total-Count`` |
| ``next_url`` | ``after``, ``limit`` | ``pagination.next``: the next page's URL (relative) |
| ``cursor`` | ``cursor``, ``limit`` | ``pagination.next_cursor``: an opaque token |
| ``keyset`` | ``after_id``, ``limit`` | the last record's ``id`` (``pagination.more``) |

Link pages state the listing's total in ``X-Total-Count``; page, next URL, cursor and keyset pages
in ``pagination.total_items`` (page) or ``pagination.total`` (the others).
| ``all`` | none | nothing: every record in one answer (at most ``MAX_ALL``) |

Offset, page and link pages are positions in the listing as it is *now*: a record deleted or
created before a client's position shifts what the next page holds (offsets drift). Next URL,
cursor and keyset pages start after an id, and ids only grow along a listing: they do not drift.
A request without ``paging`` is answered exactly as it was before the other styles existed.
The runtime's ``paging_loop`` breaks the pagination on purpose (see ``prepare``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode

from democrm.wire import ApiError, Headers

Record = dict[str, Any]

MAX_LIMIT = 500
DEFAULT_LIMIT = 100
MAX_START = 10**12
MAX_ALL = 10_000
"""The most records ``paging=all`` answers in one page; a larger listing is a 400."""
STYLES = ("offset", "page", "link", "next_url", "cursor", "keyset", "all")


@dataclass(frozen=True)
class Listing:
    """One listing: record indices ``first..end`` minus the ``deleted`` ones (sorted), where a
    record's id is its index + 1, built by ``make``."""

    first: int
    end: int
    make: Callable[[int], Record]
    deleted: tuple[int, ...] = ()

    @property
    def total(self) -> int:
        return self.end - self.first - len(self.deleted)

    def at(self, position: int, limit: int) -> list[Record]:
        """``limit`` records from ``position`` (0-based) in the listing as it is now."""
        index = self.first + position
        for gone in self.deleted:
            if gone > index:
                break
            index += 1
        return self._from(index, limit)

    def after(self, record_id: int, limit: int) -> list[Record]:
        """``limit`` records whose id is above ``record_id``."""
        return self._from(max(self.first, record_id), limit)

    def _from(self, index: int, limit: int) -> list[Record]:
        if not self.deleted:
            return [self.make(i) for i in range(index, min(index + limit, self.end))]
        deleted, records = set(self.deleted), list[Record]()
        while index < self.end and len(records) < limit:
            if index not in deleted:
                records.append(self.make(index))
            index += 1
        return records


Produce = Callable[[], tuple[Any, Headers]]


class FirstPage(Listing):
    """A listing that ignores the position asked: every page is its first (``paging_loop``
    ``page``, a broken offset pagination)."""

    def at(self, position: int, limit: int) -> list[Record]:
        return super().at(0, limit)


def prepare(listing: Listing, path: str, query: str, epoch: int = 0, loop: str = "off") -> Produce:
    """Check the query's paging parameters (400 naming the bad one; 410 for a cursor given out
    before the cursor ``epoch``) and return what builds the page: its JSON payload and its extra
    headers. ``loop`` (the runtime's ``paging_loop``) breaks the pagination: ``token`` repeats
    a cursor, ``page`` answers the first page at every position."""
    params = parse_qs(query, keep_blank_values=True)
    style = params.get("paging", ["offset"])[-1]
    if style not in STYLES:
        message = f"paging must be one of {', '.join(STYLES)}, got {style!r}"
        raise ApiError(400, "bad_request", message)
    if style == "cursor":
        return by_cursor(listing, path, params, epoch, repeat=loop == "token")
    if loop == "page":
        listing = FirstPage(listing.first, listing.end, listing.make, listing.deleted)
    build: Callable[[Listing, str, dict[str, list[str]]], Produce] = BUILDERS[style]
    return build(listing, path, params)


def by_offset(listing: Listing, path: str, params: dict[str, list[str]]) -> Produce:
    start, limit = int_param(params, "start", 0, 0, MAX_START), size(params, "limit")

    def produce() -> tuple[Any, Headers]:
        return offset_page(listing.at(start, limit), start, limit, listing.total), ()

    return produce


def offset_page(records: list[Record], start: int, limit: int, total: int) -> dict[str, Any]:
    """An offset page: the records and ``{start, limit, more, next_start}``."""
    end = start + len(records)
    more = end < total
    pagination = {"start": start, "limit": limit, "more": more, "next_start": end if more else None}
    return {"data": records, "pagination": pagination}


def page_params(query: str) -> tuple[int, int]:
    """``start`` (default 0) and ``limit`` (default 100, at most 500), or 400."""
    params = parse_qs(query, keep_blank_values=True)
    return int_param(params, "start", 0, 0, MAX_START), size(params, "limit")


def by_page(listing: Listing, path: str, params: dict[str, list[str]]) -> Produce:
    number, per_page = int_param(params, "page", 1, 1, MAX_START), size(params, "per_page")

    def produce() -> tuple[Any, Headers]:
        records, total = listing.at((number - 1) * per_page, per_page), listing.total
        pagination = {
            "page": number,
            "per_page": per_page,
            "total_items": total,
            "total_pages": -(-total // per_page),
        }
        return {"data": records, "pagination": pagination}, ()

    return produce


def by_link(listing: Listing, path: str, params: dict[str, list[str]]) -> Produce:
    start, limit = int_param(params, "start", 0, 0, MAX_START), size(params, "limit")

    def produce() -> tuple[Any, Headers]:
        records, total = listing.at(start, limit), listing.total
        headers: Headers = (("X-Total-Count", str(total)),)
        end = start + len(records)
        if records and end < total:
            first = url(path, paging="link", limit=limit)
            following = url(path, paging="link", start=end, limit=limit)
            headers += (("Link", f'<{first}>; rel="first", <{following}>; rel="next"'),)
        return {"data": records}, headers

    return produce


def by_next_url(listing: Listing, path: str, params: dict[str, list[str]]) -> Produce:
    after, limit = int_param(params, "after", 0, 0, MAX_START), size(params, "limit")

    def produce() -> tuple[Any, Headers]:
        records, more = after_id(listing, after, limit)
        following = (
            url(path, paging="next_url", after=records[-1]["id"], limit=limit) if more else None
        )
        return {"data": records, "pagination": {"next": following, "total": listing.total}}, ()

    return produce


def by_cursor(
    listing: Listing,
    path: str,
    params: dict[str, list[str]],
    epoch: int = 0,
    repeat: bool = False,
) -> Produce:
    """Cursor pages; with ``repeat`` a page given a cursor names that same cursor as the next."""
    given = params.get("cursor", [""])[-1]
    after = decode_cursor(given, path, epoch)
    limit = size(params, "limit")

    def produce() -> tuple[Any, Headers]:
        records, more = after_id(listing, after, limit)
        following = encode_cursor(path, records[-1]["id"], epoch) if more else None
        if repeat and given and following:
            following = given
        pagination = {"next_cursor": following, "total": listing.total}
        return {"data": records, "pagination": pagination}, ()

    return produce


def by_keyset(listing: Listing, path: str, params: dict[str, list[str]]) -> Produce:
    after, limit = int_param(params, "after_id", 0, 0, MAX_START), size(params, "limit")

    def produce() -> tuple[Any, Headers]:
        records, more = after_id(listing, after, limit)
        pagination = {"limit": limit, "more": more, "total": listing.total}
        return {"data": records, "pagination": pagination}, ()

    return produce


def by_all(listing: Listing, path: str, params: dict[str, list[str]]) -> Produce:
    if listing.total > MAX_ALL:
        message = f"{listing.total} records are too many for paging=all (at most {MAX_ALL})"
        raise ApiError(400, "bad_request", message)
    return lambda: ({"data": listing.at(0, listing.total)}, ())


BUILDERS: dict[str, Callable[[Listing, str, dict[str, list[str]]], Produce]] = {
    "offset": by_offset,
    "page": by_page,
    "link": by_link,
    "next_url": by_next_url,
    "keyset": by_keyset,
    "all": by_all,
}


def after_id(listing: Listing, after: int, limit: int) -> tuple[list[Record], bool]:
    """Up to ``limit`` records with an id above ``after``, and whether more follow."""
    records = listing.after(after, limit + 1)
    return records[:limit], len(records) > limit


def url(path: str, **params: Any) -> str:
    return f"{path}?{urlencode(params)}"


def encode_cursor(path: str, after: int, epoch: int = 0) -> str:
    fields = {"l": path, "a": after, **({"e": epoch} if epoch else {})}
    raw = json.dumps(fields, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str, path: str, epoch: int = 0) -> int:
    """The id a cursor of this listing starts after (0 for no cursor); 400 if it is not one,
    410 if it was given out before the cursors of ``epoch``."""
    if not text:
        return 0
    try:
        value = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, ValueError):
        value = None
    after = value.get("a") if isinstance(value, dict) and value.get("l") == path else None
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise ApiError(400, "bad_request", f"cursor {text[:40]!r} is not a cursor of {path}")
    if value.get("e", 0) != epoch:
        message = "the cursor has expired: start the listing again from its first page"
        raise ApiError(410, "cursor_expired", message)
    return after


def size(params: dict[str, list[str]], name: str) -> int:
    return int_param(params, name, DEFAULT_LIMIT, 1, MAX_LIMIT)


def int_param(params: dict[str, list[str]], name: str, default: int, low: int, high: int) -> int:
    if name not in params:
        return default
    value = parse_id(params[name][-1])
    if value is None or not low <= value <= high:
        message = f"{name} must be an integer between {low} and {high}, got {params[name][-1]!r}"
        raise ApiError(400, "bad_request", message)
    return value


def parse_id(text: str) -> int | None:
    """A plain non-negative decimal integer, or None (not '+1', '1e3' or non-ASCII digits)."""
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        return None
    return int(text)
