"""The demo CRM's declarative provider walked in each pagination style the demo CRM serves
(its ``paging=`` parameter, see hack/democrm/paging.py): the built-in provider with each kind's
pagination, and the ``paging`` value its requests carry, swapped.

    definition("cursor")  # a provider definition for RunRequest.provider_definition
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from ferryman_worker.providers import load

PAGING: dict[str, tuple[str, dict[str, Any]]] = {
    "page_number": (
        "page",
        {
            "style": "page_number",
            "pageParam": "page",
            "sizeParam": "per_page",
            "totalPages": "pagination.total_pages",
            "stop": {"total": "pagination.total_items"},
        },
    ),
    "link_header": (
        "link",
        {"style": "link_header", "sizeParam": "limit", "stop": {"totalHeader": "X-Total-Count"}},
    ),
    "next_url": (
        "next_url",
        {
            "style": "next_url",
            "next": "pagination.next",
            "sizeParam": "limit",
            "stop": {"total": "pagination.total"},
        },
    ),
    "cursor": (
        "cursor",
        {
            "style": "cursor",
            "param": "cursor",
            "next": "pagination.next_cursor",
            "sizeParam": "limit",
            "stop": {"total": "pagination.total"},
        },
    ),
    "keyset": (
        "keyset",
        {
            "style": "keyset",
            "key": "id",
            "param": "after_id",
            "sizeParam": "limit",
            "stop": {"more": "pagination.more", "total": "pagination.total"},
        },
    ),
    "single": ("all", {"style": "single"}),
}
"""Per pagination style: the demo CRM's ``paging`` value and the kinds' pagination (with the
total the demo CRM states in that style, so each walk is reconciled with it)."""

STYLES = ("offset", *PAGING)
"""Every style; ``offset`` is the built-in provider itself."""


def definition(style: str) -> dict[str, Any] | None:
    """The demo CRM provider walking every kind in ``style`` (None for ``offset``: the
    built-in provider, found by its name)."""
    if style == "offset":
        return None
    paging, pagination = PAGING[style]
    found = copy.deepcopy(_builtin())
    for kind in found["spec"]["kinds"].values():
        kind["request"]["query"] = {**kind["request"].get("query", {}), "paging": paging}
        kind["pagination"] = {**pagination, "maxPageSize": 500}
    return found


@functools.cache
def _builtin() -> dict[str, Any]:
    provider = load("democrm")
    found: dict[str, Any] = provider.definition()  # type: ignore[attr-defined]
    return found
