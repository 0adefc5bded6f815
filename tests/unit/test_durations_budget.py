"""The suite's time budget (tests/support/durations_budget.py): a run whose ten slowest tests
take longer together than the budget file allows fails, naming them; one within it passes."""

from __future__ import annotations

from pathlib import Path

import pytest
from durations_budget import BUDGET_FILE, DurationsBudget, over_budget, read_budget

SUITE = """
import time

def busy(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass

def test_quick():
    busy(0.01)

def test_slower():
    busy(0.05)
"""


def run(pytester: pytest.Pytester, budget: float) -> pytest.RunResult:
    """The two tests above, inline, with the plugin at `budget` seconds."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(SUITE)
    return pytester.runpytest("-p", "no:cacheprovider", plugins=[DurationsBudget(budget)])


def test_a_run_over_the_budget_fails_and_names_its_slowest_tests(pytester: pytest.Pytester) -> None:
    result = run(pytester, 0.04)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*durations budget*",
            "*the 2 slowest tests took * over the budget of 0 s*",
            "*test_a_run_over_the_budget_fails*.py::test_slower",
            "*raise the budget on purpose*",
        ]
    )


def test_a_run_within_the_budget_passes(pytester: pytest.Pytester) -> None:
    result = run(pytester, 600)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    assert "durations budget" not in result.stdout.str()


def test_only_the_ten_slowest_count() -> None:
    durations = {f"t{n}": float(n) for n in range(1, 21)}  # the ten slowest: 11 .. 20
    assert over_budget(durations, sum(range(11, 21))) is None
    failure = over_budget(durations, sum(range(11, 21)) - 1)
    assert failure is not None and "t20" in failure and "t10" not in failure


def test_the_budget_file_holds_a_number_of_seconds(tmp_path: Path) -> None:
    assert read_budget(BUDGET_FILE) > 0
    empty = tmp_path / "budget.txt"
    empty.write_text("# only a comment\n")
    with pytest.raises(ValueError, match="no budget"):
        read_budget(empty)
