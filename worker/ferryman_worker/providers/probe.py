"""Pagination styles a listing's one live response suggests, for ``ferryman provider probe``.

Reads what the answer shows (a ``Link`` header, a next URL or a cursor in the body, totals and
page numbers, ``X-Total-Count``, the query the URL was asked with) and returns every style it
points at, the most telling first, each as the ``pagination`` block a provider file would hold
and the reason. It only suggests: one response cannot show how an API ends its listing, and
nothing here is ever chosen for a provider without a person writing it down.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from ferryman_worker.providers.pagination import link_next

NEXT_URL = ("next", "nextLink", "next_link", "next_url", "nextUrl", "next_page_url", "nextPageUrl")
CURSOR = (
    "next_cursor",
    "nextCursor",
    "cursor",
    "next_page_token",
    "nextPageToken",
    "endCursor",
    "continue",
    "after",
    "next_token",
    "nextToken",
    "scroll_id",
)
"""Field names of a next page's cursor (the first few are the most telling)."""
MORE = ("has_more", "hasMore", "more", "has_next", "hasNext", "hasNextPage", "more_items")
TOTAL_PAGES = ("totalPages", "total_pages", "pageCount", "page_count", "last_page", "lastPage")
TOTAL = ("totalItems", "total_items", "total", "totalCount", "total_count", "count")
PAGE = ("page", "_page", "pageNumber", "page_number", "p")
SIZE = ("perPage", "per_page", "pageSize", "page_size", "limit", "_limit", "size")
OFFSET = ("offset", "_start", "start", "skip", "from")
NEXT_OFFSET = ("next_start", "next_offset", "nextOffset", "next_skip")
PAGING_PARAMS = ("sizeParam", "pageParam", "offsetParam", "param")
"""The keys of a ``pagination`` block naming a query parameter the pagination itself sets."""
RECORDS = ("data", "items", "results", "records", "entries", "values", "rows", "nodes")


@dataclasses.dataclass(frozen=True)
class Suggestion:
    """One pagination style the response points at: ``pagination`` as a provider file writes
    it (camelCase keys), ``records`` the body path of the records, ``why`` what showed it."""

    pagination: dict[str, Any]
    records: str
    why: str

    def request(self, url: str) -> dict[str, Any]:
        """The kind's ``request`` for ``url``: its path, and the query parameters the answer
        may depend on (json-server sends its Link header only when ``_page`` is asked for),
        but not those the pagination sets on each page."""
        parts = urllib.parse.urlsplit(url)
        paged = {self.pagination.get(key) for key in PAGING_PARAMS}
        query = {
            name: value
            for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
            if name not in paged
        }
        return {"path": parts.path or "/", **({"query": query} if query else {})}


def suggest(url: str, headers: Mapping[str, str], body: Any) -> list[Suggestion]:
    """Every style the answer to ``url`` suggests, the most telling first; the last one is
    ``single`` when nothing in it looks like paging."""
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    lowered = {name.lower(): value for name, value in headers.items()}
    records = records_path(body)
    found = [
        suggestion
        for rule in (_link_header, _next_url, _cursor, _page_number, _offset)
        if (suggestion := rule(query, lowered, body, records)) is not None
    ]
    if not found:
        why = "nothing in the response looks like paging: one page, or ask with a page size"
        found.append(Suggestion({"style": "single"}, records, why))
    return found


def records_path(body: Any) -> str:
    """The body path of the records: "" for a list, else the largest list of objects (a
    conventional name first), searched two levels deep."""
    if isinstance(body, list):
        return ""
    lists = [(path, value) for path, value in _fields(body, 2) if _objects(value)]
    if not lists:
        return ""
    conventional = [path for path, _ in lists if path.rsplit(".", 1)[-1] in RECORDS]
    return conventional[0] if conventional else max(lists, key=lambda item: len(item[1]))[0]


def _objects(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _fields(body: Any, depth: int, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every field of ``body``'s objects, ``depth`` levels down."""
    if not isinstance(body, Mapping) or depth == 0:
        return
    for name, value in body.items():
        if not isinstance(name, str) or "." in name:
            continue
        path = f"{prefix}{name}"
        yield path, value
        yield from _fields(value, depth - 1, path + ".")


def _find(body: Any, names: tuple[str, ...], test: Any = None) -> str | None:
    """The path of the first field named one of ``names`` (in their order) whose value
    passes ``test``, searched three levels deep; None if none."""
    fields = list(_fields(body, 3))
    for name in names:
        for path, value in fields:
            if path.rsplit(".", 1)[-1] == name and (test is None or test(value)):
                return path
    return None


def _is_url(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(("http://", "https://", "/"))


def _is_cursor(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and not _is_url(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _top(body: Any, names: tuple[str, ...]) -> str | None:
    """The first of ``names`` that is a number at the top of ``body``."""
    if not isinstance(body, Mapping):
        return None
    return next((name for name in names if _is_number(body.get(name))), None)


def _param(query: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    return next((name for name in names if name in query), None)


def _stop(headers: Mapping[str, str], body: Any) -> dict[str, Any]:
    stop: dict[str, Any] = {}
    more = _find(body, MORE, lambda value: isinstance(value, bool))
    if more:
        stop["more"] = more
    if "x-total-count" in headers:
        stop["totalHeader"] = "X-Total-Count"
    elif (total := _find(body, TOTAL, _is_number)) is not None:
        stop["total"] = total
    return stop


def _sized(
    block: dict[str, Any], query: Mapping[str, str], stop: dict[str, Any], body: Any = None
) -> dict[str, Any]:
    """``block`` with the page size's parameter (the URL's, else a size the body echoes at its
    top) and the stop rules."""
    size = _param(query, SIZE) or _top(body, SIZE)
    if size:
        block["sizeParam"] = size
    if stop:
        block["stop"] = stop
    return block


def _link_header(
    query: Mapping[str, str], headers: Mapping[str, str], body: Any, records: str
) -> Suggestion | None:
    target = link_next(headers.get("link", ""))
    if target is None:
        return None
    block = _sized({"style": "link_header"}, query, _stop(headers, body))
    return Suggestion(block, records, 'a Link header names the next page (rel="next")')


def _next_url(
    query: Mapping[str, str], headers: Mapping[str, str], body: Any, records: str
) -> Suggestion | None:
    path = _find(body, NEXT_URL, _is_url)
    if path is None:
        return None
    block = _sized({"style": "next_url", "next": path}, query, _stop(headers, body))
    return Suggestion(block, records, f"the body's {path} holds the next page's URL")


def _cursor(
    query: Mapping[str, str], headers: Mapping[str, str], body: Any, records: str
) -> Suggestion | None:
    path = _find(body, CURSOR, _is_cursor)
    if path is None:
        return None
    name = path.rsplit(".", 1)[-1]
    param = _param(query, CURSOR) or _sent_as(name)
    block = {"style": "cursor", "next": path, "param": param}
    block = _sized(block, query, _stop(headers, body))
    why = f"the body's {path} looks like the next page's cursor (sent back as {param}: check)"
    return Suggestion(block, records, why)


def _sent_as(name: str) -> str:
    """The parameter a cursor field is usually sent back in: next_cursor -> cursor."""
    for prefix in ("next_", "next", "end"):
        if name.startswith(prefix) and len(name) > len(prefix):
            rest = name[len(prefix) :]
            return rest[0].lower() + rest[1:]
    return name


def _page_number(
    query: Mapping[str, str], headers: Mapping[str, str], body: Any, records: str
) -> Suggestion | None:
    pages = _find(body, TOTAL_PAGES, _is_number)
    param = _param(query, PAGE)
    in_body = _find(body, PAGE, _is_number)
    if pages is None and param is None and in_body is None:
        return None
    block: dict[str, Any] = {"style": "page_number", "pageParam": param or in_body or "page"}
    if pages:
        block["totalPages"] = pages
    block = _sized(block, query, _stop(headers, body), body)
    shown = ", ".join(f for f in (pages, in_body and f"{in_body} in the body") if f)
    why = f"page numbers ({shown or f'{param} in the URL'})"
    return Suggestion(block, records, why)


def _offset(
    query: Mapping[str, str], headers: Mapping[str, str], body: Any, records: str
) -> Suggestion | None:
    param = _param(query, OFFSET)
    following = _find(body, NEXT_OFFSET, lambda value: _is_number(value) or value is None)
    counted = "x-total-count" in headers and _param(query, PAGE) is None
    if param is None and following is None and not counted:
        return None
    offset = param or (_sent_as(following.rsplit(".", 1)[-1]) if following else "offset")
    block = {"style": "offset", "offsetParam": offset, "sizeParam": "limit"}
    block = _sized(block, query, _stop(headers, body), body)
    shown = [f"{param} in the URL" if param else "", following or "", counted and "X-Total-Count"]
    return Suggestion(block, records, f"offsets ({', '.join(s for s in shown if s)})")


def snippet(url: str, status: int, suggestions: list[Suggestion]) -> str:
    """The suggestions as a kind's YAML: the first as ``records`` and ``pagination``, the
    others as comments; headed by a comment saying it is a suggestion."""
    best, *others = suggestions
    lines = [
        f"# SUGGESTION from one response (HTTP {status}) of GET {url}",
        "# Nothing was chosen for you: check it against the API's documentation, then try it",
        "# with `ferryman provider sample`.",
        f"# Why: {best.why}.",
        *_query_note(best.request(url)),
        yaml.safe_dump(
            {"request": best.request(url), "records": best.records, "pagination": best.pagination},
            sort_keys=False,
        ),
    ]
    if others:
        lines.append("# The response also fits:")
    for other in others:
        flow = yaml.safe_dump(
            other.pagination, default_flow_style=True, width=10_000, sort_keys=False
        ).strip()
        lines.append(f"#   pagination: {flow}   # {other.why}")
    return "\n".join(line.rstrip("\n") for line in lines)


def _query_note(request: dict[str, Any]) -> list[str]:
    if "query" not in request:
        return []
    names = ", ".join(request["query"])
    return [
        f"# request.query keeps {names} from the probed URL: the answer (its links, its paging)",
        "# may depend on it; drop it only once `provider sample` shows the whole listing without",
        "# it.",
    ]
