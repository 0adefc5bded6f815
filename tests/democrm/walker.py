"""A plain client of the demo CRM's paging styles (``paging=``), following each style's own
"next" until the listing ends, as a user of the API would; ``between`` runs after each page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx

STYLES = ("offset", "page", "link", "next_url", "cursor", "keyset", "all")

Query = dict[str, Any]


def walk(
    http: httpx.Client,
    path: str,
    style: str,
    limit: int = 100,
    between: Callable[[], None] = lambda: None,
) -> list[int]:
    """The ids of every record the listing at ``path`` gives, page after page, in order."""
    ids: list[int] = []
    query: Query | None = first(style, limit)
    while query is not None:
        response = http.get(path, params=query).raise_for_status()
        body = response.json()
        ids += [record["id"] for record in body["data"]]
        path, query = following(style, path, query, response, limit, ids)
        between()
    return ids


def first(style: str, limit: int) -> Query:
    if style == "all":
        return {"paging": "all"}
    if style == "page":
        return {"paging": "page", "per_page": limit}
    return {"paging": style, "limit": limit}


def following(
    style: str, path: str, query: Query, response: httpx.Response, limit: int, ids: list[int]
) -> tuple[str, Query | None]:
    """The next page's path and query, or None when the style says the listing ended."""
    body = response.json()
    pagination = body.get("pagination", {})
    if style == "offset":
        more = pagination["more"]
        return path, {**query, "start": pagination["next_start"]} if more else None
    if style == "page":
        more = pagination["page"] < pagination["total_pages"]
        return path, {**query, "page": pagination["page"] + 1} if more else None
    if style == "keyset":
        return path, {**query, "after_id": ids[-1]} if pagination["more"] else None
    if style == "cursor":
        cursor = pagination["next_cursor"]
        return path, {**query, "cursor": cursor} if cursor else None
    target = (
        pagination.get("next") if style == "next_url" else response.links.get("next", {}).get("url")
    )
    if style == "all" or not target:
        return path, None
    parts = urlsplit(target)
    return parts.path, dict(parse_qsl(parts.query))
