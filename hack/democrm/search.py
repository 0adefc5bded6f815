"""A collection's search, ``POST /v1/<kind>/search``, shaped like HubSpot's CRM search: the
listing's position and filter travel in a JSON body, and the next page is named in the answer.

    POST /v1/deals/search   {"after": "40", "limit": 20, "filter": {"status": "won"}}
    200 {"total": 51, "results": [deal...], "paging": {"next": {"after": "97"}}}

``after`` is the id the page starts after (a string of digits, as HubSpot gives it, or an
integer; default: from the first record); ``limit`` 1..500 (default 100); ``filter`` keeps the
records whose fields equal the values given (top-level fields of the kind, scalar values).
The last page has no ``paging``. Ordered by id, a page starts after an id: it does not drift.
A bad body is a 400 naming the field and what it takes.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from democrm import paging
from democrm.wire import ApiError, Headers

Record = dict[str, Any]

FIELDS = {
    "organizations": ("id", "name", "domain", "created_at"),
    "people": ("id", "org_id", "name", "email", "phone"),
    "deals": ("id", "org_id", "title", "value", "currency", "stage", "status"),
}
"""The fields a search may filter on, per kind."""
BODY_FIELDS = ("after", "limit", "filter")


@dataclass(frozen=True)
class Query:
    """A validated search body."""

    after: int = 0
    limit: int = paging.DEFAULT_LIMIT
    filter: tuple[tuple[str, Any], ...] = ()

    def matches(self, record: Record) -> bool:
        return all(
            type(record.get(name)) is type(value) and record.get(name) == value
            for name, value in self.filter
        )


def parse(kind: str, body: bytes) -> Query:
    """The search body of ``kind`` (an empty body is ``{}``), or a 400 naming what is wrong."""
    try:
        given = json.loads(body) if body.strip() else {}
    except (UnicodeDecodeError, ValueError):
        raise bad('the body must be a JSON object, e.g. {"after": "0", "limit": 100}') from None
    if not isinstance(given, dict):
        raise bad(f"the body must be a JSON object, got {type(given).__name__}")
    unknown = sorted(set(given) - set(BODY_FIELDS))
    if unknown:
        raise bad(f"unknown field(s) {', '.join(unknown)}: a search takes {', '.join(BODY_FIELDS)}")
    return Query(
        after=_after(given.get("after", 0)),
        limit=_limit(given.get("limit", paging.DEFAULT_LIMIT)),
        filter=_filter(kind, given.get("filter", {})),
    )


def _after(value: Any) -> int:
    number = paging.parse_id(value) if isinstance(value, str) else value
    if type(number) is not int or not 0 <= number <= paging.MAX_START:
        raise bad(f"after must be a record id (a string of digits, or an integer), got {value!r}")
    return number


def _limit(value: Any) -> int:
    if type(value) is not int or not 1 <= value <= paging.MAX_LIMIT:
        raise bad(f"limit must be an integer between 1 and {paging.MAX_LIMIT}, got {value!r}")
    return value


def _filter(kind: str, value: Any) -> tuple[tuple[str, Any], ...]:
    if not isinstance(value, dict):
        raise bad(f"filter must be an object of field: value, got {type(value).__name__}")
    fields = FIELDS[kind]
    for name, wanted in value.items():
        if name not in fields:
            raise bad(f"filter: {kind} have no field {name!r} to filter on ({', '.join(fields)})")
        if not isinstance(wanted, str | int | float | bool):
            raise bad(f"filter.{name}: give a string, number or boolean, got {wanted!r}")
    return tuple(sorted(value.items()))


def bad(message: str) -> ApiError:
    return ApiError(400, "bad_request", f"search body: {message}")


def produce(
    indices: Sequence[int], make: Callable[[int], Record], query: Query
) -> Callable[[], tuple[Any, Headers]]:
    """What answers the search over the records at ``indices`` (ascending; a record's id is its
    index + 1), built by ``make``."""

    def answer() -> tuple[Any, Headers]:
        position = bisect.bisect_left(indices, query.after)  # the first index whose id > after
        results: list[Record] = []
        more = False
        for index in indices[position:]:
            record = make(index)
            if not query.matches(record):
                continue
            if len(results) == query.limit:
                more = True
                break
            results.append(record)
        total = (
            len(indices)
            if not query.filter
            else sum(1 for index in indices if query.matches(make(index)))
        )
        page: dict[str, Any] = {"total": total, "results": results}
        if more:
            page["paging"] = {"next": {"after": str(results[-1]["id"])}}
        return page, ()

    return answer
