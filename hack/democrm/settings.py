"""The two kinds of settings: what the data *is* (fixed per process) and how the API *behaves*.

``Dataset`` decides every record, id and defect; it is set on the command line and never changes,
so the ground truth of a running server is stable. ``Runtime`` is latency, faults and the token
budget; the CLI sets its starting values and ``POST /_config`` replaces it while serving.
Both are frozen: a request reads one consistent snapshot.
"""

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class SettingsError(ValueError):
    """A setting is out of range or of the wrong type; the message names it."""


@dataclass(frozen=True)
class Dataset:
    seed: int = 1
    """Everything below is derived from this and the sizes; same seed, same data."""
    organizations: int = 2000
    people: int = 800
    deals: int = 150
    messages_per_deal: int = 3
    """Mean message count per deal; each deal has 0..2*mean messages, chosen from its hash."""
    malformed_rate: float = 0.01
    """Share of records (of every kind) served with one deliberate defect."""
    gone_deal_rate: float = 0.0
    """Share of deals deleted after the deals listing: still listed, but their messages (the
    listing and every body) answer 404, and the truth has no messages for them."""

    def __post_init__(self) -> None:
        for name in ("organizations", "people", "deals", "messages_per_deal"):
            check_int(name, getattr(self, name), 0, 100_000_000)
        check_int("seed", self.seed, -(2**63), 2**63 - 1)
        check_number("malformed_rate", self.malformed_rate, 0.0, 1.0)
        check_number("gone_deal_rate", self.gone_deal_rate, 0.0, 1.0)
        if self.organizations == 0 and (self.people or self.deals):
            raise SettingsError("people and deals need at least one organization")


@dataclass(frozen=True)
class Runtime:
    latency_ms: float = 0.0
    """Sleep before answering a listing (organizations, people, deals, a deal's messages)."""
    body_latency_ms: float = 0.0
    """Sleep before answering a message body."""
    error_rate: float = 0.0
    """Share of /v1 requests answered 500, 502 or 503."""
    stall_rate: float = 0.0
    """Share of /v1 requests that sleep ``stall_seconds`` before answering."""
    stall_seconds: float = 30.0
    budget_capacity: float = 0.0
    """Tokens a key's bucket holds when full; 0 means no budget (never 429)."""
    budget_refill_per_s: float = 100.0
    """Tokens added to each bucket per second, up to the capacity."""
    listing_cost: int = 20
    body_cost: int = 1
    retry_after: str = "seconds"
    """How a 429 says when to come back: ``seconds`` (``Retry-After: 3``) or ``date`` (an HTTP
    date, ``Retry-After: Sat, 05 Dec 2026 01:00:03 GMT``)."""
    paging_loop: str = "off"
    """A broken pagination, to meet a client's loop guard: ``off``; ``token`` (a cursor listing
    hands back as its next cursor the one it was given); ``page`` (offset, page and link
    listings ignore the position asked and answer the first page)."""

    def __post_init__(self) -> None:
        for name, choices in RUNTIME_CHOICES.items():
            if getattr(self, name) not in choices:
                raise SettingsError(
                    f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}"
                )
        for name, (low, high) in RUNTIME_RANGES.items():
            value = getattr(self, name)
            if name.endswith("_cost"):
                check_int(name, value, int(low), int(high))
            else:
                check_number(name, value, low, high)
        if 0 < self.budget_capacity < max(self.listing_cost, self.body_cost):
            raise SettingsError("budget_capacity must be at least the listing and body costs")

    def updated(self, changes: Mapping[str, Any]) -> "Runtime":
        """A copy with ``changes`` applied; unknown names and bad values raise SettingsError."""
        unknown = sorted(set(changes) - set(RUNTIME_RANGES) - set(RUNTIME_CHOICES))
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(unknown)}")
        return dataclasses.replace(self, **changes)

    def budget_changed(self, other: "Runtime") -> bool:
        return (self.budget_capacity, self.budget_refill_per_s) != (
            other.budget_capacity,
            other.budget_refill_per_s,
        )


RUNTIME_RANGES: dict[str, tuple[float, float]] = {
    "latency_ms": (0, 600_000),
    "body_latency_ms": (0, 600_000),
    "error_rate": (0, 1),
    "stall_rate": (0, 1),
    "stall_seconds": (0, 3600),
    "budget_capacity": (0, 1e15),
    "budget_refill_per_s": (0, 1e15),
    "listing_cost": (0, 1_000_000),
    "body_cost": (0, 1_000_000),
}
"""Inclusive bounds of every numeric runtime setting, shared by the CLI and ``POST /_config``."""

RUNTIME_CHOICES: dict[str, tuple[str, ...]] = {
    "retry_after": ("seconds", "date"),
    "paging_loop": ("off", "token", "page"),
}
"""The values of every runtime setting that is a word."""


def check_int(name: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise SettingsError(f"{name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise SettingsError(f"{name} must be between {low} and {high}, got {value}")


def check_number(name: str, value: object, low: float, high: float) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise SettingsError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or not low <= value <= high:
        raise SettingsError(f"{name} must be between {low:g} and {high:g}, got {value}")
