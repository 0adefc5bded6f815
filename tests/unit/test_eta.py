"""The ETA's arithmetic (``eta.estimate``), without a database."""

from __future__ import annotations

from ferryman_worker import console, eta
from ferryman_worker.providers import load

COSTS = {"deals": eta.Costs(20), "messages": eta.Costs(20, 1)}


def messages(parents_done: int, rows: int, active: float) -> eta.KindWork:
    return eta.KindWork("messages", 3, 10, parents_done // 10, rows, 100, parents_done, active)


def test_nothing_done_yet_gives_no_eta() -> None:
    assert eta.estimate([messages(0, 0, 5.0)], COSTS, 100.0, 3, 4) is None


def test_without_a_declared_rate_the_pace_so_far_decides() -> None:
    found = eta.estimate([messages(25, 100, 10.0)], COSTS, None, 3, 4)
    assert found is not None and found.bound == "pace"
    assert found.seconds == 30.0  # 10 s for 25 parents, 75 left
    assert console.eta_line(found) == (
        "  ETA 0:30 for the run (phase 4/4; at the pace of its tasks so far)"
    )


def test_a_budget_spent_at_its_rate_binds_with_the_tokens_left() -> None:
    # 25 parents: 25 listings x 20 + 100 bodies = 600 tokens in 5 s = 120/s of a 150/s budget
    found = eta.estimate([messages(25, 100, 5.0)], COSTS, 150.0, 3, 4)
    assert found is not None and found.bound == "rate limit"
    assert found.tokens == 75 * (20 + 4 * 1)  # 75 parents left, 4 bodies per parent so far
    assert found.seconds == found.tokens / 150.0
    assert "bound by the source's rate limit: 1,800 tokens at 150/s" in console.eta_line(found)


def test_a_budget_far_from_binding_leaves_the_pace() -> None:
    found = eta.estimate([messages(25, 100, 60.0)], COSTS, 150.0, 3, 4)  # 10 tokens/s spent
    assert found is not None and found.bound == "pace" and found.seconds == 180.0


def test_page_kinds_count_tasks_and_an_earlier_phase_is_not_the_run() -> None:
    deals = eta.KindWork("deals", 2, 8, 2, 200, 0, 0, 4.0)
    found = eta.estimate([deals], COSTS, None, 2, 4)
    assert found is not None and found.seconds == 12.0  # 2 s per task, 6 left
    assert console.eta_line(found).startswith("  ETA 0:12 for this phase (phase 3/4;")


def test_costs_come_from_the_providers_requests() -> None:
    costs = eta.costs_of(load("democrm"), ["organizations", "messages"])
    assert costs == {"organizations": eta.Costs(20), "messages": eta.Costs(20, 1)}
