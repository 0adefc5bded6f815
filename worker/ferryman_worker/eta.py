"""A run's ETA for its open phase, and what bounds it: the pace of its tasks so far, or the
source's rate limit.

Two estimates of the open phase's remaining time, the larger wins:

- the **pace**: each kind's time so far (the union of its tasks' working spans) per unit done,
  times the units left (a tree kind's unit is a parent, a page kind's a task);
- the **budget**, when the run declares the source's rate limit (``spec.source.rateLimit``): the
  tokens the remaining calls need (a listing per page task; per parent of a tree kind its
  children's listing and, at the rows per parent seen so far, their bodies) at the budget's rate.

Later phases are not listed yet (their tasks come from what this phase writes), so the ETA is the
open phase's; it is the run's when that phase is the last. Pure arithmetic on the database's
aggregates; no clock, no I/O besides ``read``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.providers import Provider


@dataclasses.dataclass(frozen=True)
class KindWork:
    """One kind's work so far (``eta.sql``'s ``open_work`` and the kind's active seconds)."""

    kind: str
    phase: int
    tasks: int
    done: int
    rows: int
    parents: int
    parents_done: int
    active_seconds: float


@dataclasses.dataclass(frozen=True)
class Costs:
    """Tokens per call for one kind: a listing page, and (tree kinds) a child's body."""

    listing: float
    body: float = 0.0


@dataclasses.dataclass(frozen=True)
class Estimate:
    seconds: float
    bound: str
    """``rate limit`` or ``pace``."""
    tokens: float
    rate: float | None
    phase: int
    phases: int


BINDING = 0.75
"""The budget binds when the open phase spends tokens at this share of its rate or more."""


def estimate(
    work: list[KindWork],
    costs: dict[str, Costs],
    rate: float | None,
    phase: int,
    phases: int,
) -> Estimate | None:
    """The open phase's remaining time, or None before any of its units is done.

    When the phase has been spending tokens at ``BINDING`` of the declared rate or more, the
    budget binds: the time is the remaining tokens at that rate (the pace so far lags behind
    the calls made for units not finished yet, and would overshoot). Otherwise the pace, or
    the budget if even that is slower."""
    open_kinds = [k for k in work if k.phase == phase]
    paces = [_pace(k) for k in open_kinds]
    if not open_kinds or any(p is None for p in paces):
        return None
    pace = max(p for p in paces if p is not None)
    tokens = sum(_tokens(k, costs.get(k.kind)) for k in open_kinds)
    budget = tokens / rate if rate else 0.0
    active = max(k.active_seconds for k in open_kinds)
    spent = sum(_spent(k, costs.get(k.kind)) for k in open_kinds)
    binding = bool(rate) and active > 0 and spent / active >= BINDING * (rate or 0.0)
    if binding or budget > pace:
        return Estimate(budget, "rate limit", tokens, rate, phase, phases)
    return Estimate(pace, "pace", tokens, rate, phase, phases)


def _pace(k: KindWork) -> float | None:
    if k.done >= k.tasks:
        return 0.0
    if k.parents:
        if not k.parents_done or not k.active_seconds:
            return None
        return k.active_seconds / k.parents_done * (k.parents - k.parents_done)
    if not k.done or not k.active_seconds:
        return None
    return k.active_seconds / k.done * (k.tasks - k.done)


def _tokens(k: KindWork, costs: Costs | None) -> float:
    if costs is None or k.done >= k.tasks:
        return 0.0
    if k.parents:
        left = k.parents - k.parents_done
        per_parent = k.rows / k.parents_done if k.parents_done else 0.0
        return left * (costs.listing + per_parent * costs.body)
    return (k.tasks - k.done) * costs.listing


def _spent(k: KindWork, costs: Costs | None) -> float:
    """Tokens the kind's finished units cost (their listings and bodies)."""
    if costs is None:
        return 0.0
    if k.parents:
        return k.parents_done * costs.listing + k.rows * costs.body
    return k.done * costs.listing


def costs_of(provider: Provider, kinds: list[str]) -> dict[str, Costs]:
    """Each kind's call costs, from the requests the provider makes (a kind whose requests
    cannot be made up here has none: its tokens are left out)."""
    found: dict[str, Costs] = {}
    for name in kinds:
        kind = provider.kinds[name]
        try:
            if kind.walk == "tree":
                found[name] = Costs(
                    provider.children(name, 0, 0, 1).cost, provider.body(name, {"id": 0}).cost
                )
            else:
                found[name] = Costs(provider.listing(name, 0, 1).cost)
        except (KeyError, TypeError, ValueError):
            continue
    return found


def read(conn: Connection, run_id: int, progress: list[dict[str, Any]]) -> Estimate | None:
    """The ETA of run ``run_id`` while it runs (None: it does not, or nothing is done yet);
    ``progress``: its ``runs.kind_progress`` rows (each kind's active seconds)."""
    from ferryman_worker.providers import load

    run = conn.execute(queries.get("run_by_id", "engine.sql"), {"run_id": run_id}).fetchone()
    active = {str(p["kind"]): float(p["active_seconds"] or 0.0) for p in progress}
    if run is None or run["state"] != "running" or run["suspended"]:
        return None
    rows = conn.execute(queries.get("open_work", "eta.sql"), {"run_id": run["id"]}).fetchall()
    work = [
        KindWork(
            r["kind"],
            int(r["phase"]),
            int(r["tasks"]),
            int(r["done"]),
            int(r["rows"]),
            int(r["parents"]),
            int(r["parents_done"]),
            float(active.get(r["kind"], 0.0)),
        )
        for r in rows
    ]
    limit = (run["options"] or {}).get("rate_limit") or {}
    costs = costs_of(load(run["provider"]), [k.kind for k in work])
    return estimate(
        work, costs, limit.get("tokens_per_second"), int(run["phase"]), len(run["phases"])
    )
