"""``DemoCRM``: the demo CRM's provider written in Python (registered as ``democrm_python``), the
example of a provider in code, for what a YAML document cannot say. It says what
``provider.yaml`` declares (``declared``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferryman_worker.providers import AuthStyle, ChangedSince, Kind, Provider, Reply, Request
from ferryman_worker.providers.democrm import models
from ferryman_worker.providers.pagination import Offset, Stops

LISTING_COST = 20
BODY_COST = 1
MAX_PAGE = 500

LISTING = Offset(offset="start", size="limit")
"""Top-level listings: by start offset, striped; a short page is the last."""
CHANGED = ChangedSince("updated_since", version="updated_at", deleted="deleted")
"""A delta lists what changed since a time; each record's updated_at is its version; a deleted
record is a tombstone marked deleted."""
CHILDREN = Offset(Stops(more="pagination.more"), offset="start", size="limit")
"""A deal's messages: page after page while ``pagination.more`` says so."""


class DemoCRM(Provider):
    """The demo CRM's API paths, page shape and destination writers."""

    name = "democrm"
    phases: tuple[tuple[str, ...], ...] = (
        ("organizations",),
        ("people",),
        ("deals",),
        ("messages",),
    )
    kinds = {
        "organizations": Kind(
            "organizations", models.Organization, pagination=LISTING, changed_since=CHANGED
        ),
        "people": Kind("people", models.Person, pagination=LISTING, changed_since=CHANGED),
        "deals": Kind("deals", models.Deal, pagination=LISTING, changed_since=CHANGED),
        "messages": Kind(
            "messages", models.Message, walk="tree", parent="deals", pagination=CHILDREN
        ),
    }
    auth = AuthStyle("bearer")

    def listing(self, kind: str, parent: Mapping[str, Any] | None) -> Request:
        if parent is not None:
            return Request(f"/v1/deals/{parent['id']}/messages", cost=LISTING_COST)
        return Request(f"/v1/{kind}", cost=LISTING_COST)

    def records(self, kind: str, reply: Reply) -> list[dict[str, Any]]:
        return list(reply.body["data"])

    def body(self, kind: str, record: dict[str, Any]) -> Request:
        return Request(f"/v1/messages/{record['id']}", cost=BODY_COST)

    def merge_body(self, kind: str, record: dict[str, Any], body: Any) -> dict[str, Any]:
        return {**record, "body": body.get("body")}

    def writer(self, kind: str) -> str:
        return f"democrm_write_{kind}"  # sql/migrations/0005_democrm_writers.sql


python_provider = DemoCRM()
