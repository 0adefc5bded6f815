"""The ETA's arithmetic (``eta.estimate``) and wording, without a database."""

from __future__ import annotations

import dataclasses

from ferryman_worker import console, eta
from ferryman_worker.providers import load

COSTS = {"deals": eta.Costs(20), "messages": eta.Costs(20, 1)}


def messages(parents_done: int, rows: int, active: float, phase: int = 3) -> eta.KindWork:
    return eta.KindWork(
        "messages", phase, 10, parents_done // 10, rows, 100, parents_done, active, "tree", "deals"
    )


def deals(tasks: int, done: int, rows: int, active: float, phase: int = 2) -> eta.KindWork:
    return eta.KindWork("deals", phase, tasks, done, rows, 0, 0, active)


def later_messages(phase: int = 3) -> eta.KindWork:
    return eta.KindWork("messages", phase, 0, 0, 0, 0, 0, 0.0, "tree", "deals")


def test_nothing_walked_yet_gives_a_lower_bound_and_says_what_is_missing() -> None:
    found = eta.estimate([deals(2, 2, 180, 1.0), messages(0, 0, 5.0)], COSTS, 100.0, 3, 4)
    assert not found.complete
    assert found.unknown == ("messages: rows per deals row (none walked yet)",)
    assert found.seconds == 100 * 20 / 100.0  # a listing per deal at least, at 100 tokens/s
    assert console.eta_lines(found) == [
        "  ETA at least 0:20 for the run (bound by the source's rate limit: 2,000 tokens at"
        " 100/s); not known yet: messages: rows per deals row (none walked yet)"
    ]


def test_without_a_declared_rate_the_pace_so_far_decides() -> None:
    found = eta.estimate([messages(25, 100, 10.0)], COSTS, None, 3, 4)
    assert found.complete and found.bound == "pace"
    assert found.seconds == 30.0  # 10 s for 25 parents, 75 left
    assert console.eta_lines(found) == ["  ETA 0:30 for the run (at the pace of its tasks so far)"]


def test_a_budget_spent_at_its_rate_binds_with_the_tokens_left() -> None:
    # 25 parents: 25 listings x 20 + 100 bodies = 600 tokens in 5 s = 120/s of a 150/s budget
    found = eta.estimate([messages(25, 100, 5.0)], COSTS, 150.0, 3, 4)
    assert found.complete and found.bound == "rate limit"
    assert found.tokens == 75 * (20 + 4 * 1)  # 75 parents left, 4 bodies per parent so far
    assert found.seconds == found.tokens / 150.0
    assert console.eta_lines(found) == [
        "  ETA 0:12 for the run (bound by the source's rate limit: 1,800 tokens at 150/s)"
    ]


def test_a_budget_far_from_binding_leaves_the_pace() -> None:
    found = eta.estimate([messages(25, 100, 60.0)], COSTS, 150.0, 3, 4)  # 10 tokens/s spent
    assert found.bound == "pace" and found.seconds == 180.0


def test_half_the_rate_spent_on_finished_units_binds_and_less_does_not() -> None:
    # 600 tokens spent on finished parents: in 8 s = 75/s (half of 150: the calls in flight
    # are not counted yet); in 8.1 s a little under half
    bound = eta.estimate([messages(25, 100, 8.0)], COSTS, 150.0, 3, 4)
    assert bound.bound == "rate limit" and bound.seconds == 1800 / 150.0
    paced = eta.estimate([messages(25, 100, 8.1)], COSTS, 150.0, 3, 4)
    assert paced.bound == "pace" and paced.seconds == 8.1 / 25 * 75


def test_nothing_known_says_so_without_a_figure() -> None:
    found = eta.estimate([eta.KindWork("people", 1, 4, 0, 0, 0, 0, 0.0)], COSTS, None, 1, 2)
    assert eta.run_line(found) == (
        "ETA not known yet for the run: people: pages left (listed until a short page; the"
        " source gives no total)"
    )


def test_a_page_kind_being_listed_is_a_lower_bound_of_its_open_stripes() -> None:
    # 8 tasks, 6 done in 12 s: 2 stripes still listing, each at least one page more
    found = eta.estimate([deals(8, 6, 600, 12.0)], COSTS, None, 2, 3)
    (part,) = found.parts
    assert part.seconds == 4.0 and not part.complete
    assert part.unknown == (
        "deals: pages left (listed until a short page; the source gives no total)",
    )


def test_a_page_kind_whose_source_states_its_total_counts_the_pages_left_from_it() -> None:
    # 6 pages of 100 listed in 12 s, the source states 2,000: 14 pages left at 2 s each
    work = dataclasses.replace(deals(8, 6, 600, 12.0), total=2000, listed=600)
    (part,) = eta.estimate([work], COSTS, None, 2, 3).parts
    assert (part.seconds, part.tokens, part.unknown) == (28.0, 14 * 20, ())


def test_the_run_adds_up_its_phases_and_names_every_unknown_part() -> None:
    # deals listing (2 of 8 pages to go at 2 s each), then messages of the 600 deals so far
    work = [deals(8, 6, 600, 12.0), later_messages()]
    found = eta.estimate(work, COSTS, 150.0, 2, 4)
    assert [p.phase for p in found.parts] == [2, 3]
    assert found.parts[1].tokens == 600 * 20  # one listing per deal seen, at least
    assert found.parts[1].bound == "rate limit" and found.parts[1].seconds == 80.0
    assert found.seconds == 4.0 + 80.0 and found.bound == "rate limit"
    assert found.unknown == (
        "deals: pages left (listed until a short page; the source gives no total)",
        "messages: rows per deals row (its phase has not started)",
        "messages: how many deals rows (still being listed)",
    )
    lines = console.eta_lines(found)
    assert lines[0].startswith("  phase 3/4 (deals): ETA at least 0:04 (at the pace")
    assert lines[1].startswith("  phase 4/4 (messages): ETA at least 1:20 (bound by the source's")
    assert lines[2].startswith(
        "  ETA at least 1:24 for the run (bound by the source's rate limit: 12,040 tokens at"
        " 150/s); not known yet: deals: pages left"
    )


def test_a_later_tree_kind_whose_parents_are_listed_knows_how_many_there_are() -> None:
    work = [deals(8, 8, 700, 14.0, phase=0), eta.KindWork("people", 1, 3, 1, 100, 0, 0, 2.0)]
    found = eta.estimate([*work, later_messages(2)], COSTS, None, 1, 3)
    assert found.parts[1].unknown == ("messages: rows per deals row (its phase has not started)",)


def test_a_finished_phase_costs_nothing_and_the_last_one_is_the_run() -> None:
    found = eta.estimate([deals(2, 2, 180, 1.0), messages(50, 200, 10.0)], COSTS, None, 3, 4)
    assert len(found.parts) == 1 and found.seconds == 10.0 and found.complete


def test_costs_come_from_the_providers_requests() -> None:
    costs = eta.costs_of(load("democrm"), ["organizations", "messages"])
    assert costs == {"organizations": eta.Costs(20), "messages": eta.Costs(20, 1)}
