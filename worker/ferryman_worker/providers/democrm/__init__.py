"""The built-in provider for the demo CRM API (``hack/democrm``): organizations, people, deals,
and the e-mail messages of each deal (a tree: listed per deal, bodies fetched one by one)."""

from __future__ import annotations

from typing import Any

from ferryman_worker.providers import Kind, Page, Request
from ferryman_worker.providers.democrm import models

LISTING_COST = 20
BODY_COST = 1


class DemoCRM:
    """The demo CRM's API paths, page shape and destination writers."""

    name = "democrm"
    phases: tuple[tuple[str, ...], ...] = (
        ("organizations",),
        ("people",),
        ("deals",),
        ("messages",),
    )
    kinds = {
        "organizations": Kind("organizations", models.Organization),
        "people": Kind("people", models.Person),
        "deals": Kind("deals", models.Deal),
        "messages": Kind("messages", models.Message, walk="tree", parent="deals"),
    }

    def listing(self, kind: str, start: int, limit: int) -> Request:
        return Request(f"/v1/{kind}", {"start": start, "limit": limit}, LISTING_COST)

    def children(self, kind: str, parent_id: int, start: int, limit: int) -> Request:
        return Request(
            f"/v1/deals/{parent_id}/messages", {"start": start, "limit": limit}, LISTING_COST
        )

    def body(self, kind: str, record: dict[str, Any]) -> Request:
        return Request(f"/v1/messages/{record['id']}", {}, BODY_COST)

    def parse_page(self, payload: Any) -> Page:
        return Page(list(payload["data"]), bool(payload["pagination"]["more"]))

    def merge_body(self, record: dict[str, Any], payload: Any) -> dict[str, Any]:
        return {**record, "body": payload.get("body")}

    def writer(self, kind: str) -> str:
        return f"democrm_write_{kind}"  # sql/migrations/0005_democrm_writers.sql


provider = DemoCRM()
