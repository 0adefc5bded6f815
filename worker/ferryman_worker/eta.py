"""A run's ETA, per phase and for the run, and what bounds it: the pace of its tasks so far, or
the source's rate limit. What cannot be estimated yet is said, never guessed.

Per phase still to do (the open one and every later one), two estimates, the larger wins:

- the **pace**: each kind's time so far (the union of its tasks' working spans) per unit done,
  times the units left (a tree kind's unit is a parent, a page kind's a task);
- the **budget**, when the run declares the source's rate limit (``spec.source.rateLimit``): the
  tokens the remaining calls need (a listing per page; per parent of a tree kind its children's
  listing and, at the rows per parent seen so far, their bodies) at the budget's rate.

What is known of a phase depends on what the run has seen:

- a **tree** kind of the open phase has all its tasks (a list of parents each) from the start: it
  is known once one of its parents is walked (the rows per parent so far);
- a **tree** kind of a later phase: its parents are the rows its parent kind wrote (final once
  that kind is done), so at least one listing each is known; its rows per parent are not, before
  its phase starts;
- a **page** kind's listing has no known length until its last page (the source's pages give no
  total): at least the pages its open stripes are at, the rest unknown.

The run's ETA is the sum of its phases'; when a part is unknown it is a lower bound, and the
unknown parts are named. Pure arithmetic on the database's aggregates; no clock, no I/O besides
``read``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ferryman_worker import wording
from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.providers import Provider

RATE_LIMIT = "rate limit"
PACE = "pace"


@dataclasses.dataclass(frozen=True)
class KindWork:
    """One kind's work so far (``eta.sql``'s ``open_work`` and the kind's active seconds); a kind
    whose phase has not started has no tasks (zeros)."""

    kind: str
    phase: int
    tasks: int
    done: int
    rows: int
    parents: int
    parents_done: int
    active_seconds: float
    walk: str = "pages"
    """``pages`` or ``tree`` (``providers.Kind.walk``)."""
    parent: str | None = None
    """A tree kind's parent kind."""
    total: int | None = None
    """A page kind's total as its source states it (None: it states none)."""
    listed: int = 0
    """The records a page kind's finished tasks listed."""


@dataclasses.dataclass(frozen=True)
class Costs:
    """Tokens per call for one kind: a listing page, and (tree kinds) a child's body."""

    listing: float
    body: float = 0.0


@dataclasses.dataclass(frozen=True)
class PhaseEstimate:
    """One phase's remaining time: the whole of it, or (``unknown`` not empty) what is known."""

    phase: int
    kinds: tuple[str, ...]
    seconds: float
    tokens: float
    bound: str
    """``rate limit`` or ``pace``."""
    unknown: tuple[str, ...] = ()
    """What cannot be estimated yet, in words (``seconds`` is then a lower bound)."""

    @property
    def complete(self) -> bool:
        return not self.unknown


@dataclasses.dataclass(frozen=True)
class Estimate:
    """The run's remaining time: its phases from the open one on."""

    parts: tuple[PhaseEstimate, ...]
    rate: float | None
    phase: int
    """The open phase (0-based)."""
    phases: int
    """How many phases the run has."""

    @property
    def seconds(self) -> float:
        """The run's remaining seconds (a lower bound unless ``complete``)."""
        return sum(p.seconds for p in self.parts)

    @property
    def tokens(self) -> float:
        """The tokens the remaining calls need (of the parts estimated)."""
        return sum(p.tokens for p in self.parts)

    @property
    def bound(self) -> str:
        """What binds the run: what binds the phases that take most of its time."""
        by_rate = sum(p.seconds for p in self.parts if p.bound == RATE_LIMIT)
        return RATE_LIMIT if by_rate and by_rate >= self.seconds / 2 else PACE

    @property
    def unknown(self) -> tuple[str, ...]:
        return tuple(u for p in self.parts for u in p.unknown)

    @property
    def complete(self) -> bool:
        return not self.unknown


BINDING = 0.5
"""The budget binds when the open phase spends tokens at this share of its rate or more. The
tokens counted are those of finished units (a tree kind's parents up to each task's checkpoint),
which lag the calls in flight: early in a rate-bound phase they read as half the rate (measured
against the demo CRM: 65-78 tokens/s of 150 in its first 4 s), so 0.75 took a bound phase for
a paced one and overshot by 70 %."""


@dataclasses.dataclass(frozen=True)
class _Left:
    """One kind's remaining work: its pace (None: not known), tokens, tokens spent, unknowns."""

    pace: float | None
    tokens: float
    spent: float = 0.0
    unknown: tuple[str, ...] = ()


def estimate(
    work: list[KindWork],
    costs: dict[str, Costs],
    rate: float | None,
    phase: int,
    phases: int,
) -> Estimate:
    """The run's remaining time, phase by phase from the open one (``phase``) to the last."""
    by_kind = {k.kind: k for k in work}
    parts = []
    for number in range(phase, phases):
        kinds = [k for k in work if k.phase == number]
        left = [_left(k, by_kind, costs.get(k.kind), number > phase) for k in kinds]
        parts.append(_phase(number, kinds, left, rate, is_open=number == phase))
    return Estimate(tuple(parts), rate, phase, phases)


def _phase(
    number: int, kinds: list[KindWork], left: list[_Left], rate: float | None, *, is_open: bool
) -> PhaseEstimate:
    """The phase's time: the budget's when it binds (the open phase spends tokens at BINDING of
    the rate: the pace so far lags behind the calls made for units not finished yet and would
    overshoot), else the slower of the pace and the budget."""
    names = tuple(k.kind for k in kinds)
    unknown = tuple(u for part in left for u in part.unknown)
    pace = max((p.pace or 0.0 for p in left), default=0.0)
    tokens = sum(p.tokens for p in left)
    budget = tokens / rate if rate else 0.0
    active = max((k.active_seconds for k in kinds), default=0.0)
    spent = sum(p.spent for p in left)
    binding = is_open and bool(rate) and active > 0 and spent / active >= BINDING * (rate or 0.0)
    if binding or budget > pace:
        return PhaseEstimate(number, names, budget, tokens, RATE_LIMIT, unknown)
    return PhaseEstimate(number, names, pace, tokens, PACE, unknown)


def _left(k: KindWork, by_kind: dict[str, KindWork], costs: Costs | None, later: bool) -> _Left:
    if k.tasks and k.done >= k.tasks:
        return _Left(0.0, 0.0, _spent(k, costs))
    if k.walk == "tree" and later:
        return _later_tree(k, by_kind.get(k.parent or ""), costs)
    if k.walk == "tree":
        return _open_tree(k, costs)
    return _pages(k, costs, later)


def _open_tree(k: KindWork, costs: Costs | None) -> _Left:
    left = k.parents - k.parents_done
    listing = costs.listing if costs else 0.0
    if not k.parents_done or not k.active_seconds:
        return _Left(
            None,
            left * listing,
            unknown=(f"{k.kind}: rows per {k.parent or 'parent'} row (none walked yet)",),
        )
    per_parent = k.rows / k.parents_done
    tokens = left * (listing + per_parent * (costs.body if costs else 0.0))
    pace = k.active_seconds / k.parents_done * left
    return _Left(pace, tokens, _spent(k, costs))


def _later_tree(k: KindWork, parent: KindWork | None, costs: Costs | None) -> _Left:
    """A tree kind of a phase not started: a listing per parent at least; its rows per parent
    (their bodies, and the listings past the first page) are not known before it starts."""
    parents = parent.rows if parent is not None else 0
    unknown = [f"{k.kind}: rows per {k.parent or 'parent'} row (its phase has not started)"]
    if parent is None or not parent.tasks or parent.done < parent.tasks:
        unknown.append(f"{k.kind}: how many {k.parent or 'parent'} rows (still being listed)")
    return _Left(None, parents * (costs.listing if costs else 0.0), unknown=tuple(unknown))


def _pages(k: KindWork, costs: Costs | None, later: bool) -> _Left:
    """A page kind whose listing has not ended: from its stated total, the pages left at the
    records a page its finished tasks listed; else the pages its open stripes are at, at
    least."""
    left = k.tasks - k.done
    if k.total is not None and k.done and k.listed:
        pages = max(-(-(k.total - k.listed) * k.done // k.listed), left)
        pace = k.active_seconds / k.done * pages if k.active_seconds else None
        return _Left(pace, pages * (costs.listing if costs else 0.0), _spent(k, costs))
    pace = k.active_seconds / k.done * left if k.done and k.active_seconds else None
    why = "not listed yet" if later or not k.tasks else "listed until a short page"
    return _Left(
        pace,
        left * (costs.listing if costs else 0.0),
        _spent(k, costs),
        (f"{k.kind}: pages left ({why}; the source gives no total)",),
    )


def _spent(k: KindWork, costs: Costs | None) -> float:
    """Tokens the kind's finished units cost (their listings and bodies)."""
    if costs is None:
        return 0.0
    if k.walk == "tree":
        return k.parents_done * costs.listing + k.rows * costs.body
    return k.done * costs.listing


def run_line(found: Estimate) -> str:
    """``ETA 2:10:00 for the run (bound by the source's rate limit: 1,930,000 tokens at 250/s)``;
    with unknown parts ``ETA at least …; not known yet: …``."""
    return _line("the run", found.seconds, found.bound, found.tokens, found.rate, found.unknown)


def phase_lines(found: Estimate) -> list[str]:
    """One per phase still to do: ``phase 4/4 (messages): ETA 1:10 (at the pace of its tasks so
    far)``."""
    return [
        f"phase {p.phase + 1}/{found.phases} ({'+'.join(p.kinds)}): "
        + _line("", p.seconds, p.bound, p.tokens, found.rate, p.unknown)
        for p in found.parts
    ]


def _line(
    scope: str, seconds: float, bound: str, tokens: float, rate: float | None, unknown: Any
) -> str:
    scope = f" for {scope}" if scope else ""
    if bound == RATE_LIMIT:
        at = f" at {rate:,g}/s" if rate else ""
        why = f"bound by the source's rate limit: {tokens:,.0f} tokens{at}"
    else:
        why = "at the pace of its tasks so far"
    if not unknown:
        return f"ETA {wording.duration(seconds)}{scope} ({why})"
    missing = "; ".join(unknown)
    if int(seconds) == 0:
        return f"ETA not known yet{scope}: {missing}"
    return f"ETA at least {wording.duration(seconds)}{scope} ({why}); not known yet: {missing}"


def costs_of(provider: Provider, kinds: list[str]) -> dict[str, Costs]:
    """Each kind's call costs, from the requests the provider makes (a kind whose requests
    cannot be made up here has none: its tokens are left out)."""
    found: dict[str, Costs] = {}
    for name in kinds:
        kind = provider.kinds[name]
        try:
            if kind.walk == "tree":
                body = provider.body(name, {"id": "0"})
                found[name] = Costs(
                    provider.listing(name, {"id": "0"}).cost, body.cost if body else 0
                )
            else:
                found[name] = Costs(provider.listing(name, None).cost)
        except (KeyError, TypeError, ValueError):
            continue
    return found


def read(conn: Connection, run_id: int, progress: list[dict[str, Any]]) -> Estimate | None:
    """The ETA of run ``run_id`` while it runs (None: it does not); ``progress``: its
    ``runs.kind_progress`` rows (each kind's active seconds)."""
    run = conn.execute(queries.get("run_by_id", "engine.sql"), {"run_id": run_id}).fetchone()
    if run is None or not running(run):
        return None
    return of_run(run, progress, open_work(conn, [run_id]).get(run_id, []))


def running(run: dict[str, Any]) -> bool:
    """Whether the run (its ``ferryman_runs`` row) runs, so has an ETA."""
    return bool(run["state"] == "running" and not run["suspended"])


def open_work(conn: Connection, run_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """``eta.sql``'s ``open_work`` rows of each run of ``run_ids``, in one statement."""
    found: dict[int, list[dict[str, Any]]] = {run_id: [] for run_id in run_ids}
    params = {"run_ids": run_ids}
    for row in conn.execute(queries.get("open_work", "eta.sql"), params).fetchall():
        found[int(row["run_id"])].append(row)
    return found


def of_run(
    run: dict[str, Any], progress: list[dict[str, Any]], rows: list[dict[str, Any]]
) -> Estimate:
    """The ETA of the running ``run`` (its row: phases, phase, provider, options) from its
    kinds' active seconds (``progress``) and its ``open_work`` rows."""
    from ferryman_worker import providers

    active = {str(p["kind"]): float(p["active_seconds"] or 0.0) for p in progress}
    seen = {str(r["kind"]): r for r in rows}
    provider = providers.of_run(run)
    work = [
        _work(name, number, seen.get(name, {}), active.get(name, 0.0), provider)
        for number, names in enumerate(run["phases"])
        for name in names
    ]
    limit = (run["options"] or {}).get("rate_limit") or {}
    costs = costs_of(provider, [k.kind for k in work])
    return estimate(
        work, costs, limit.get("tokens_per_second"), int(run["phase"]), len(run["phases"])
    )


def _work(
    name: str, phase: int, row: dict[str, Any], active: float, provider: Provider
) -> KindWork:
    """A kind's ``open_work`` row (empty: no task yet) as KindWork."""

    def count(column: str) -> int:
        return int(row.get(column) or 0)

    kind = provider.kinds[name]
    return KindWork(
        name,
        phase,
        count("tasks"),
        count("done"),
        count("rows"),
        count("parents"),
        count("parents_done"),
        active,
        kind.walk,
        kind.parent,
        None if row.get("total") is None else int(row["total"]),
        count("listed"),
    )
