"""Pagination styles: how a kind's pages follow each other, and when they end.

A page is reached by a *token* (any JSON value: an offset, a page number, a URL, an opaque
cursor, the last record's sort key); the first page's token is ``first()``. Where tokens are
known ahead (``striped``: offset, page number) the engine walks stripes side by side
(``ahead``); otherwise each page's token comes from the page before (``follow``), one chain per
part of the kind's split.

A chain ends at the first stop rule that holds (``Stops``): an empty page always; the total
reached (a body field or a header); a has-more field false; a short page; no next token; a
declared maximum of pages.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from ferryman_worker.providers.exchange import Reply, Request, dig

__all__ = [
    "Cursor",
    "Keyset",
    "LinkHeader",
    "NextUrl",
    "Offset",
    "PageNumber",
    "Pagination",
    "Reply",
    "Request",
    "Single",
    "Stops",
    "dig",
    "link_next",
]


@dataclasses.dataclass(frozen=True)
class Stops:
    """The stop rules besides the empty page: ``total`` (body path) or ``total_header`` hold the
    number of records in the listing; ``more`` a body path whose false value ends it;
    ``short_page``: fewer records than asked for end it; ``max_pages``: at most that many
    pages (0: no maximum); ``remaining``: a body path of the number of records after this page
    (the kube-apiserver's ``metadata.remainingItemCount``), which states the listing's size as
    the records its chain listed up to this page's end plus it."""

    total: str = ""
    total_header: str = ""
    more: str = ""
    short_page: bool = False
    max_pages: int = 0
    remaining: str = ""

    def reason(
        self, reply: Reply, records: Sequence[Any], size: int, seen: int | None, page: int
    ) -> str | None:
        """Why the listing ends after this page (``seen``: records up to its end, when the
        style knows; ``page``: its index in the chain), or None."""
        if not records:
            return "an empty page"
        if self.more and dig(reply.body, self.more) is False:
            return f"{self.more} is false"
        total = self.stated_total(reply)
        if total is not None and seen is not None and seen >= total:
            return f"the total ({total}) is reached"
        if self.short_page and len(records) < size:
            return "a short page"
        if self.max_pages and page + 1 >= self.max_pages:
            return f"the declared maximum of {self.max_pages} pages"
        return None

    @property
    def declared_total(self) -> str:
        """Where the listing states its size (a body path or a header), "" if nowhere."""
        return self.total or self.total_header or self.remaining

    def stated_total(self, reply: Reply, upto: int | None = None) -> int | None:
        """The listing's record count as this page states it, or None; ``upto``: the records
        its chain listed up to this page's end (a ``remaining`` count adds to it)."""
        value: Any = None
        if self.total:
            value = dig(reply.body, self.total)
        elif self.total_header:
            value = reply.headers.get(self.total_header)
        elif self.remaining:
            left = dig(reply.body, self.remaining)
            if upto is None or not isinstance(left, int) or isinstance(left, bool):
                return None
            return upto + left
        try:
            return None if value is None else int(value)
        except (TypeError, ValueError):
            return None


@dataclasses.dataclass(frozen=True)
class Pagination:
    """The base of every style: a chain of pages, each token from the page before."""

    stops: Stops = Stops()
    size: str = ""
    """The query parameter asking for the page size ("" : the API has none)."""

    striped: ClassVar[bool] = False
    style: ClassVar[str] = ""

    def first(self) -> Any:
        """The first page's token."""
        return None

    def ahead(self, token: Any, pages: int, size: int) -> Any:
        """The token ``pages`` pages of ``size`` after ``token`` (striped styles only)."""
        raise NotImplementedError(f"{self.style} pages are not known ahead")

    def apply(self, request: Request, token: Any, size: int) -> Request:
        """The request for the page at ``token``."""
        return request.with_params(**{self.size: size}) if self.size else request

    def follow(self, token: Any, reply: Reply, records: Sequence[Any]) -> Any:
        """The next page's token as the page says (None: it names none)."""
        return None

    def seen(self, token: Any, records: Sequence[Any], size: int) -> int | None:
        """How many records the listing has given up to this page's end, if known."""
        return None

    @property
    def declared_total(self) -> str:
        """Where the listing states its size ("" : nowhere): its walk is reconciled with it."""
        return self.stops.declared_total

    def stated_total(
        self, reply: Reply, records: Sequence[Any], before: int = 0, token: Any = None
    ) -> int | None:
        """The least number of records the listing holds as this page states it, or None
        (``before``: the records its chain listed before this page; ``token``: the page's)."""
        return self.stops.stated_total(reply, before + len(records))

    @property
    def least_only(self) -> bool:
        """Whether the stated total is only a least bound (a number of pages), not a count."""
        return False

    def next(self, token: Any, reply: Reply, records: Sequence[Any], size: int, page: int) -> Any:
        """The next page's token, or None when a stop rule says the listing ended here."""
        if self.stop(token, reply, records, size, page) is not None:
            return None
        return self.follow(token, reply, records)

    def stop(
        self, token: Any, reply: Reply, records: Sequence[Any], size: int, page: int
    ) -> str | None:
        reason = self.stops.reason(reply, records, size, self.seen(token, records, size), page)
        if reason is None and not self.striped and self.follow(token, reply, records) is None:
            return "no next token"
        return reason


@dataclasses.dataclass(frozen=True)
class Offset(Pagination):
    """``offset``/``limit`` parameters: page tokens are record offsets."""

    stops: Stops = Stops(short_page=True)
    offset: str = "offset"
    size: str = "limit"
    striped: ClassVar[bool] = True
    style: ClassVar[str] = "offset"

    def first(self) -> Any:
        return 0

    def ahead(self, token: Any, pages: int, size: int) -> Any:
        return int(token) + pages * size

    def apply(self, request: Request, token: Any, size: int) -> Request:
        return super().apply(request, token, size).with_params(**{self.offset: int(token)})

    def follow(self, token: Any, reply: Reply, records: Sequence[Any]) -> Any:
        return int(token) + len(records)

    def seen(self, token: Any, records: Sequence[Any], size: int) -> int | None:
        return int(token) + len(records)


@dataclasses.dataclass(frozen=True)
class PageNumber(Pagination):
    """A page number parameter (from ``first_page``) and a page size; ``total_pages``: a body
    path holding how many pages there are."""

    stops: Stops = Stops(short_page=True)
    page: str = "page"
    size: str = "per_page"
    first_page: int = 1
    total_pages: str = ""
    striped: ClassVar[bool] = True
    style: ClassVar[str] = "page_number"

    def first(self) -> Any:
        return self.first_page

    def ahead(self, token: Any, pages: int, size: int) -> Any:
        return int(token) + pages

    def apply(self, request: Request, token: Any, size: int) -> Request:
        return super().apply(request, token, size).with_params(**{self.page: int(token)})

    def follow(self, token: Any, reply: Reply, records: Sequence[Any]) -> Any:
        return int(token) + 1

    def seen(self, token: Any, records: Sequence[Any], size: int) -> int | None:
        return (int(token) - self.first_page) * size + len(records)

    @property
    def declared_total(self) -> str:
        return self.stops.declared_total or self.total_pages

    def stated_total(
        self, reply: Reply, records: Sequence[Any], before: int = 0, token: Any = None
    ) -> int | None:
        """The stated total; else, from the number of pages, the least it can be, as a page
        before the last states it: every page but the last as long as this one (the source may
        serve fewer than asked for), the last with one record. The last page, or one past it
        (a stripe's walk ends there), says nothing of the others' length: None, but for the
        only page of a listing, which is the whole of it."""
        total = self.stops.stated_total(reply, before + len(records))
        pages = dig(reply.body, self.total_pages) if self.total_pages else None
        if total is not None or not isinstance(pages, int) or isinstance(pages, bool):
            return total
        number = None if token is None else int(token) - self.first_page + 1
        if number is None or number > pages or pages < 1:
            return None
        if number == pages:
            return len(records) if pages == 1 else None
        return (pages - 1) * len(records) + 1

    @property
    def least_only(self) -> bool:
        return not self.stops.declared_total and bool(self.total_pages)

    def stop(
        self, token: Any, reply: Reply, records: Sequence[Any], size: int, page: int
    ) -> str | None:
        pages = dig(reply.body, self.total_pages) if self.total_pages else None
        if isinstance(pages, int) and int(token) - self.first_page + 1 >= pages:
            return f"the last page ({pages}) is reached"
        return super().stop(token, reply, records, size, page)


@dataclasses.dataclass(frozen=True)
class NextUrl(Pagination):
    """The body names the next page's URL at ``next`` (absolute, or relative to the base)."""

    next_url: str = "next"
    style: ClassVar[str] = "next_url"

    def apply(self, request: Request, token: Any, size: int) -> Request:
        if token is None:
            return super().apply(request, token, size)
        return dataclasses.replace(request, path=str(token), params={})

    def follow(self, token: Any, reply: Reply, records: Sequence[Any]) -> Any:
        return dig(reply.body, self.next_url) or None


@dataclasses.dataclass(frozen=True)
class LinkHeader(NextUrl):
    """An RFC 8288 ``Link`` header names the next page (``rel="next"``)."""

    rel: str = "next"
    style: ClassVar[str] = "link_header"

    def follow(self, token: Any, reply: Reply, records: Sequence[Any]) -> Any:
        return link_next(reply.headers.get("link", ""), self.rel)


LINK = re.compile(r'<([^>]*)>\s*((?:;\s*[^;,]+=(?:"[^"]*"|[^;,]*)\s*)*)')
REL = re.compile(r';\s*rel\s*=\s*(?:"([^"]*)"|([^;,\s]*))', re.IGNORECASE)


def link_next(header: str, rel: str = "next") -> str | None:
    """The target of the link whose ``rel`` includes ``rel`` in an RFC 8288 Link header."""
    for match in LINK.finditer(header):
        for found in REL.finditer(match.group(2)):
            if rel in (found.group(1) or found.group(2) or "").split():
                return match.group(1)
    return None


@dataclasses.dataclass(frozen=True)
class Cursor(Pagination):
    """An opaque cursor: read from the body at ``next`` (or from header ``next_header``), sent
    back as ``param`` in the query, the JSON body or a header (``send``)."""

    param: str = "cursor"
    next_cursor: str = "next_cursor"
    next_header: str = ""
    send: Literal["query", "body", "header"] = "query"
    style: ClassVar[str] = "cursor"

    def apply(self, request: Request, token: Any, size: int) -> Request:
        request = super().apply(request, token, size)
        if token is None:
            return request
        if self.send == "body":
            body = request.json if isinstance(request.json, Mapping) else {}
            return dataclasses.replace(request, json={**body, self.param: token})
        if self.send == "header":
            return dataclasses.replace(request, headers={**request.headers, self.param: token})
        return request.with_params(**{self.param: token})

    def follow(self, token: Any, reply: Reply, records: Sequence[Any]) -> Any:
        if self.next_header:
            return reply.headers.get(self.next_header) or None
        found = dig(reply.body, self.next_cursor)
        return None if found in (None, "") else found


@dataclasses.dataclass(frozen=True)
class Keyset(Pagination):
    """The next page starts after the last record's sort ``key``: ``param`` is sent as
    ``template`` with ``{key}`` replaced (``id>'{key}'`` for a filter, ``{key}`` for
    ``id_gt``). The listing must be sorted by the key (say so in the listing's parameters)."""

    stops: Stops = Stops(short_page=True)
    key: str = "id"
    param: str = "after"
    template: str = "{key}"
    style: ClassVar[str] = "keyset"

    def apply(self, request: Request, token: Any, size: int) -> Request:
        request = super().apply(request, token, size)
        if token is None:
            return request
        return request.with_params(**{self.param: self.template.replace("{key}", str(token))})

    def follow(self, token: Any, reply: Reply, records: Sequence[Any]) -> Any:
        last = records[-1] if records else None
        return dig(last, self.key) if isinstance(last, Mapping) else None


@dataclasses.dataclass(frozen=True)
class Single(Pagination):
    """One page: a detail endpoint, or a listing the API does not page."""

    style: ClassVar[str] = "single"

    def stop(
        self, token: Any, reply: Reply, records: Sequence[Any], size: int, page: int
    ) -> str | None:
        return "a single page"
