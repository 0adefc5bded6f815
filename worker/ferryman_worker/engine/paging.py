"""Pages of a listing: the request for the page at a token, and the position of the next page,
with the loop guard.

A task's position in a listing is opaque to the engine: the part of the kind's split, the page's
index in its chain and its token (any JSON value), plus the offset inside the page (the task's
``processed_offset``). The guard fails the task (``PagingLoop``) when the source names a token
it already gave in this chain, or answers a page identical to the one before: a pagination that
loops would otherwise walk for ever.

A token the source says is gone (an expired cursor: HTTP 410, or whatever the kind's response
policy calls gone) restarts its chain from the chain's first page (``restarted``): what the chain
wrote before is listed again and the ledger writes it once. A chain restarts at most
``MAX_RESTARTS`` times; then its task fails with the source's answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic_core

from ferryman_worker.engine.source import SourceError
from ferryman_worker.providers import Kind, Provider, Reply, Request

RECENT_TOKENS = 8
"""Tokens of a chain remembered by the guard (a loop longer than this is caught by the page
digest only if it repeats a page)."""
MAX_RESTARTS = 3
"""How often a chain may begin again after its token expired."""


class PagingLoop(SourceError):
    """The source's pagination loops: retrying cannot help."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


DEFAULT_MAX_PAGES = 100_000
"""Pages one chain of a listing may have when its kind declares no ``maxPages``, unless the
installation says otherwise (FERRYMAN_SOURCE_MAX_PAGES): past it the task fails
(``PagingLimit``) instead of walking a listing that never ends."""


class PagingLimit(SourceError):
    """A listing went past the default bound on its pages: retrying cannot help."""

    def __init__(self, kind: str, bound: int) -> None:
        super().__init__(
            f"{kind}: the listing goes on past {bound} pages, the worker's bound for a kind that"
            " declares no maximum (FERRYMAN_SOURCE_MAX_PAGES, the chart's worker.sourceMaxPages):"
            f" if the source really has more, declare it in the provider's"
            f" kinds.{kind}.pagination.maxPages (the listing then ends there), or ask for larger"
            " pages (spec.options.pageSize)",
            retryable=False,
        )


def digest(value: Any) -> str:
    return hashlib.blake2b(pydantic_core.to_json(value), digest_size=8).hexdigest()


def page_print(records: Sequence[Any]) -> str:
    """What the loop guard remembers of a page: its length, first and last records. A page
    the source repeats has the same; two different pages of one listing do not (their records
    differ, the first or last among them), and it costs two records' JSON, not the page's."""
    return digest((len(records), records[:1], records[-1:]))


@dataclasses.dataclass(frozen=True)
class Position:
    """Where a page is: its split part, its index in the chain, its token, and what the guard
    remembers of the chain before it."""

    part: int
    page: int
    token: Any
    previous: str | None = None
    """The digest of the page before it in the chain."""
    tokens: tuple[str, ...] = ()
    """Digests of the chain's recent tokens."""
    restarts: int = 0
    """How often the chain began again after the source said its token was gone."""
    listed: int = 0
    """Records the chain listed before this page (since it last began again)."""

    @classmethod
    def start(cls, kind: Kind, part: int = 0, stripe: int = 0, size: int = 0) -> Position:
        first = kind.pagination.first()
        if stripe:
            return cls(part, stripe, kind.pagination.ahead(first, stripe, size))
        return cls(part, 0, first)

    @classmethod
    def of(cls, cursor: dict[str, Any]) -> Position:
        return cls(
            int(cursor.get("part", 0)),
            int(cursor.get("page", 0)),
            cursor.get("token"),
            cursor.get("previous"),
            tuple(cursor.get("tokens", ())),
            int(cursor.get("restarts", 0)),
            int(cursor.get("listed", 0)),
        )

    def cursor(self) -> dict[str, Any]:
        found: dict[str, Any] = {"part": self.part, "page": self.page, "token": self.token}
        if self.previous is not None:
            found["previous"] = self.previous
        if self.tokens:
            found["tokens"] = list(self.tokens)
        if self.restarts:
            found["restarts"] = self.restarts
        if self.listed:
            found["listed"] = self.listed
        return found

    def restartable(self, kind: Kind) -> bool:
        """Whether a gone token here means an expired one: a chain's later page (a striped
        style's tokens are computed, and never expire)."""
        return not kind.pagination.striped and self.token != kind.pagination.first()

    def restarted(self, kind: Kind, error: SourceError) -> Position:
        """The chain's first page, as the next page of this chain (its page index goes on, so
        the tasks it creates are new); ``error`` (the source's answer) when it restarted
        ``MAX_RESTARTS`` times already."""
        if self.restarts >= MAX_RESTARTS:
            raise SourceError(
                f"{kind.name}: the source expired the chain's page token {self.restarts + 1}"
                f" times ({error}); its pages must be walked faster than it expires them",
                retryable=False,
                status=error.status,
            )
        return Position(self.part, self.page, kind.pagination.first(), restarts=self.restarts + 1)

    def key(self, kind: Kind) -> str:
        """The task's cursor key: unique in the run and kind."""
        if len(kind.split.parts) > 1:
            return f"{kind.name}:{self.part}:{self.page}"
        return f"{kind.name}:{self.page}"


def page_size(options: Mapping[str, Any], kind: Kind) -> int:
    """The run's page size for ``kind``: its ``page_size``, at most the kind's largest page."""
    return min(int(options["page_size"]), kind.max_page_size)


def request(
    provider: Provider,
    kind: Kind,
    at: Position,
    size: int,
    parent: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    changed: Mapping[str, Any] | None = None,
) -> Request:
    """The request for the page at ``at`` (``options``: the run's ``spec.source.options``;
    ``changed``: a delta run's changed-since filter)."""
    base = provider.listing(kind.name, parent).with_options(options or {})
    part = kind.split.parts[at.part] if at.part < len(kind.split.parts) else {}
    if part:
        base = base.with_params(**part)
    if changed:
        base = base.with_params(**changed)
    return kind.pagination.apply(base, at.token, size)


def following(
    kind: Kind,
    at: Position,
    reply: Reply,
    records: Sequence[dict[str, Any]],
    size: int,
    stripes: int = 1,
    bound: int = DEFAULT_MAX_PAGES,
) -> Position | None:
    """The position of the page after the one at ``at`` in its chain (``stripes`` pages on
    for a striped style), or None when the listing ends here; PagingLoop when it loops,
    PagingLimit past ``bound`` pages when the kind declares no maxPages."""
    found = _following(kind, at, reply, records, size, stripes)
    if found is not None and not kind.pagination.stops.max_pages and found.page >= bound:
        raise PagingLimit(kind.name, bound)
    return found


def _following(
    kind: Kind,
    at: Position,
    reply: Reply,
    records: Sequence[dict[str, Any]],
    size: int,
    stripes: int,
) -> Position | None:
    pagination = kind.pagination
    token = pagination.next(at.token, reply, records, size, at.page)
    if token is None:
        return None
    page_digest = page_print(records)
    if page_digest == at.previous:
        raise PagingLoop(
            f"{kind.name}: the page at token {_shown(at.token)} repeats the page before it:"
            " the source's pagination loops (check the kind's pagination style and parameters)"
        )
    if pagination.striped:
        if stripes > 1:
            token = pagination.ahead(at.token, stripes, size)
        page = at.page + stripes
        max_pages = pagination.stops.max_pages
        if max_pages and page >= max_pages:
            return None
        listed = at.listed + len(records)
        return Position(at.part, page, token, page_digest, restarts=at.restarts, listed=listed)
    seen = (*at.tokens, digest(at.token))[-RECENT_TOKENS:]
    if token == at.token or digest(token) in seen:
        raise PagingLoop(
            f"{kind.name}: the source gave the token {_shown(token)} again after page"
            f" {at.page + 1}: its pagination loops (check the kind's pagination style)"
        )
    return Position(
        at.part, at.page + 1, token, page_digest, seen, at.restarts, at.listed + len(records)
    )


@dataclasses.dataclass(frozen=True)
class Listed:
    """What one page of a chain listed, kept with its task for the kind's reconciliation
    (``reconcile``): its records, the total the source stated on it (None: none), and the
    rule that ended the chain here (None: the chain goes on)."""

    records: int
    total: int | None
    ended_by: str | None

    @classmethod
    def of(
        cls,
        kind: Kind,
        at: Position,
        reply: Reply,
        records: Sequence[Any],
        size: int,
        following: Position | None,
    ) -> Listed:
        """The page at ``at`` whose next page is ``following`` (``following``'s answer)."""
        pagination = kind.pagination
        ended_by = None
        if following is None:
            ended_by = pagination.stop(at.token, reply, records, size, at.page) or (
                f"the declared maximum of {pagination.stops.max_pages} pages"
            )
        total = pagination.stated_total(reply, records, at.listed, at.token)
        return cls(len(records), total, ended_by)


def _shown(token: Any, limit: int = 80) -> str:
    text = pydantic_core.to_json(token).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"
