"""Verdicts: the barrier's judgement of each kind of a closing phase, kept in
``ferryman_run_kinds`` in the barrier's transaction.

A kind is judged on two counts: its listing against the source's stated total (``reconcile``),
and its refused records (malformed, or refused by the database) against the run's error budget:
a kind more of whose records were refused than ``errorBudget`` allows (by default more than
half, so a kind whose every record is refused always fails) is ``refused``, named with its most
frequent reasons. A kind short or refused fails the run at its barrier: nothing of the next
phase is seeded, and the run's error says which kind and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.engine import reconcile
from ferryman_worker.providers import Provider

DEFAULT_ERROR_BUDGET = 0.5
"""The share of a kind's records that may be refused before the kind fails its run, when the
run declares none (docs/decisions.md)."""


def judge(conn: Connection, run: Mapping[str, Any], provider: Provider, phase: int) -> str | None:
    """Judge and keep each kind of ``phase``; the run's error when one failed, else None."""
    params = {"run_id": run["id"], "phase": phase}
    listings: dict[str, list[reconcile.Part]] = {}
    for row in conn.execute(queries.engine("kind_listings"), params).fetchall():
        listings.setdefault(row["kind"], []).append(reconcile.Part.of(row))
    refusals = {row["kind"]: row for row in conn.execute(queries.engine("kind_refusals"), params)}
    failures = []
    for name in run["phases"][phase]:
        kind = provider.kinds[name]
        refused = refusal(name, refusals.get(name), budget(run["options"], name))
        if kind.walk == "tree":
            found = reconcile.tree(kind, listed=name in refusals)
        else:
            found = reconcile.listing(kind, listings.get(name, []))
        verdict = refused if refused is not None and not found.failed else found
        conn.execute(
            queries.engine("save_verdict"),
            {
                "run_id": run["id"],
                "kind": name,
                "verdict": verdict.verdict,
                "listed": found.listed,
                "total": found.total,
                "note": verdict.note,
            },
        )
        if verdict.failed:
            failures.append(verdict.note)
    if not failures:
        return None
    return "not every record was imported: " + "; ".join(failures)


def budget(options: Mapping[str, Any], kind: str) -> float:
    """The share of ``kind``'s records that may be refused (the run's ``error_budget``)."""
    found: Mapping[str, Any] = options.get("error_budget") or {}
    share = found.get("kinds", {}).get(kind, found.get("share", DEFAULT_ERROR_BUDGET))
    return float(share)


def refusal(kind: str, row: Mapping[str, Any] | None, share: float) -> reconcile.Verdict | None:
    """The ``refused`` verdict of a kind more of whose records were refused than ``share``
    allows, naming its most frequent reasons; None when within it."""
    if row is None:
        return None
    failed = int(row["failed"] or 0)
    seen = failed + sum(int(row[n] or 0) for n in ("written", "skipped", "matched"))
    if not failed or failed <= share * seen:
        return None
    reasons = "; ".join(f"{r['n']:,} x {r['reason']}" for r in row["reasons"])
    every = f"all {seen:,}" if failed == seen else f"{failed:,} of the {seen:,}"
    note = (
        f"{kind}: {every} of its records were refused, more than its error budget"
        f" ({share:.0%}) allows: {reasons} (`ferryman errors` lists them; fix the provider's"
        " fields or the mapping, or raise spec.errorBudget)"
    )
    return reconcile.Verdict(kind, "refused", None, None, note)
