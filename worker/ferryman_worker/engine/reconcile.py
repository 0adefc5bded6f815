"""Reconciliation: whether what a kind's walk listed adds up to what the source said it holds.

Where the kind's pagination declares a total (a body total, a total header, a number of pages),
every page's task keeps the records it listed and the total that page stated; when the kind's
phase closes, each part of its split (its stripes together) compares the records it listed with
the least total any of its pages stated. A walk drifts when records are created or deleted while
it lists (docs/providers.md): a record listed twice (skipped by the ledger), or deleted after it
was listed, makes the walk list more than the total; a record created behind the walk moves the
total up. Those are explained and reported as such. A part that listed fewer than the least total
by more than the total moved during the walk is **short**: the run fails, naming the kind, the
counts, the rule that ended the walk and the likely fix. A kind whose source states no total is
**unverified**. A tree kind is reconciled per parent as its children are listed (``parent``).

Pure logic on the barrier's aggregate rows; ``verdicts`` reads and keeps them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ferryman_worker.providers import Kind

VerdictName = Literal["reconciled", "verified", "unverified", "short", "refused"]
"""``verified``: a verification listed the source's ids again and found each in the ledger."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A kind's verdict: ``listed`` (None for a tree kind), ``total`` (the least the source
    stated; None: it stated none) and what the verdict rests on (``note``)."""

    kind: str
    verdict: VerdictName
    listed: int | None
    total: int | None
    note: str
    short_by: int | None = None
    """How many records a ``short`` kind lacks, where its count says it (a verification's
    missing ids); None: the total less what it listed."""

    @property
    def failed(self) -> bool:
        return self.verdict in ("short", "refused")

    @property
    def shortfall(self) -> int | None:
        """How many records a ``short`` kind lacks (None: not short, or not counted)."""
        if self.verdict != "short":
            return None
        if self.short_by is not None:
            return self.short_by
        if self.total is None or self.listed is None:
            return None
        return max(self.total - self.listed, 0)


@dataclasses.dataclass(frozen=True)
class Part:
    """One part of a kind's split as its page tasks listed it (a row of ``kind_listings``)."""

    pages: int
    counted: int
    """Pages whose task kept what it listed (all of them, but for a task done before ferryman
    kept counts)."""
    listed: int
    low: int | None
    high: int | None
    ended_by: tuple[str, ...]
    skipped: int

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Part:
        return cls(
            int(row["pages"]),
            int(row["counted"]),
            int(row["listed"] or 0),
            None if row["low"] is None else int(row["low"]),
            None if row["high"] is None else int(row["high"]),
            tuple(row["ended_by"] or ()),
            int(row["skipped"] or 0),
        )


def listing(kind: Kind, parts: Sequence[Part]) -> Verdict:
    """The verdict on a page-walked kind's listing, from its parts."""
    declared = kind.pagination.declared_total
    listed = sum(part.listed for part in parts)
    if not declared:
        return Verdict(kind.name, "unverified", listed, None, "the source states no total")
    if any(part.counted < part.pages for part in parts):
        note = "pages were listed before ferryman kept their counts"
        return Verdict(kind.name, "unverified", listed, None, note)
    if any(part.low is None for part in parts):
        note = f"the declared total ({declared}) was in none of the answers: check it"
        return Verdict(kind.name, "unverified", listed, None, note)
    total = sum(part.low or 0 for part in parts)
    for number, part in enumerate(parts):
        low, high = part.low or 0, part.high or 0
        if low - part.listed > high - low:
            where = f" (part {number} of its split)" if len(parts) > 1 else ""
            return Verdict(kind.name, "short", listed, total, _short(kind, part, where))
    note = _explained(declared, parts, least=kind.pagination.least_only)
    return Verdict(kind.name, "reconciled", listed, total, note)


def tree(kind: Kind, *, listed: bool) -> Verdict:
    """The verdict on a tree kind (``listed``: it had parents to list): reconciled per parent
    as it was listed, when its listing declares a total (a short parent fails its task:
    ``parent``)."""
    if not listed:
        return Verdict(kind.name, "unverified", None, None, "no parents were written")
    declared = kind.pagination.declared_total
    if not declared:
        return Verdict(kind.name, "unverified", None, None, "the source states no total")
    note = f"each parent's children reconciled with {declared}"
    return Verdict(kind.name, "reconciled", None, None, note)


def parent(kind: Kind, parent_id: str, listed: int, totals: Sequence[int], ended_by: str) -> str:
    """Why a tree parent's children listing is short, or "" when it adds up (or states no
    total): its records against the least total its pages stated."""
    if not totals:
        return ""
    low, high = min(totals), max(totals)
    if low - listed <= high - low:
        return ""
    declared = kind.pagination.declared_total
    return (
        f"{kind.name} of {kind.parent} {parent_id}: listed {listed:,} of the {low:,} the source"
        f" states ({declared}), short by {low - listed:,}; the listing ended on {ended_by}:"
        f" {fix(kind, ended_by)}"
    )


def _short(kind: Kind, part: Part, where: str) -> str:
    low = part.low or 0
    rules = " / ".join(part.ended_by) or "no rule"
    declared = kind.pagination.declared_total
    return (
        f"{kind.name}{where}: listed {part.listed:,} of the {low:,} records the source states"
        f" ({declared}), short by {low - part.listed:,}; the walk ended on {rules}:"
        f" {fix(kind, part.ended_by[0] if part.ended_by else '')}"
    )


def _explained(declared: str, parts: Sequence[Part], *, least: bool = False) -> str:
    """What a reconciled listing rests on, and the drift it explains (``least``: the source
    states only a least bound, its number of pages: more listed is no drift)."""
    listed = sum(part.listed for part in parts)
    low = sum(part.low or 0 for part in parts)
    high = sum(part.high or 0 for part in parts)
    skipped = sum(part.skipped for part in parts)
    if least:
        return (
            f"listed {listed:,}, at least the {low:,} the source's number of pages ({declared})"
            " implies"
        )
    notes = [f"listed {listed:,}, the source states {low:,} ({declared})"]
    if high != low:
        notes.append(
            f"the total moved between {low:,} and {high:,} during the walk: records created or"
            " deleted meanwhile (a record created behind the walk is the next run's)"
        )
    if listed > high:
        notes.append(
            f"{listed - high:,} more listed than the total: records listed twice (the ledger"
            f" wrote each once; {skipped:,} skipped) or deleted after they were listed"
        )
    elif listed < low:
        notes.append(f"{low - listed:,} fewer, within the total's change during the walk")
    return "; ".join(notes)


def fix(kind: Kind, rule: str) -> str:
    """The likely fix of a walk that ``rule`` ended before the total."""
    style = kind.pagination.style
    if rule == "no next token" and style in ("link_header", "next_url"):
        return (
            "the answers named no next page although the total says more are left: the first"
            " request may need the page parameter for the server to send its links (json-server"
            " sends its Link header only when _page is asked for: add it to the kind's"
            " request.query), or the pagination does not match the API (`ferryman provider"
            " sample`)"
        )
    if rule == "no next token":
        return (
            "the answers named no next cursor although the total says more are left: check the"
            " pagination's next path and parameters with `ferryman provider sample`"
        )
    if rule == "a short page":
        return (
            "the source serves fewer records a page than asked for: set the kind's maxPageSize"
            " to the page size it serves, or stop.shortPage: false"
        )
    if rule.startswith("the declared maximum"):
        return "raise the kind's stop.maxPages (0: no maximum)"
    if rule.endswith("is false"):
        return "the has-more flag ended the walk early: check the kind's stop.more"
    return "check the kind's pagination parameters against the API with `ferryman provider sample`"
