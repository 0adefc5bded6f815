"""The suite's time budget: the run fails when its ten slowest tests together take longer than
tests/durations-budget.txt allows, so a test that grows slow is seen the day it does.

A test's time is its call phase (what `pytest --durations` shows as `call`): fixtures' setup is
left out, since a cold cache (PocketBase's build, the first control plane) lands there and would
make a first run on a fresh machine fail for no test's fault. Under pytest-xdist the reports reach
the controller, which checks them once at the end; a run of a few files checks its own ten.
The budget is raised on purpose, in a commit that says why.
"""

from __future__ import annotations

import heapq
from pathlib import Path

import pytest

BUDGET_FILE = Path(__file__).resolve().parents[1] / "durations-budget.txt"
COUNTED = 10
_calls = pytest.StashKey[dict[str, float]]()


def read_budget(path: Path = BUDGET_FILE) -> float:
    """The number of seconds on the file's first line that is not a comment."""
    for line in path.read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            return float(text)
    raise ValueError(f"{path}: no budget (a number of seconds) on any line")


def slowest(durations: dict[str, float], count: int = COUNTED) -> list[tuple[float, str]]:
    """The `count` longest (seconds, test id), longest first."""
    return heapq.nlargest(count, ((seconds, test) for test, seconds in durations.items()))


def over_budget(durations: dict[str, float], budget: float) -> str | None:
    """Why the slowest tests exceed `budget`, or None when they fit."""
    top = slowest(durations)
    total = sum(seconds for seconds, _ in top)
    if total <= budget:
        return None
    lines = "\n".join(f"  {seconds:7.1f} s  {test}" for seconds, test in top)
    return (
        f"the {len(top)} slowest tests took {total:.0f} s together, over the budget of "
        f"{budget:.0f} s in {BUDGET_FILE.relative_to(BUDGET_FILE.parents[1])}:\n{lines}\n"
        "Make them faster, or raise the budget on purpose (in a commit that says why)."
    )


class DurationsBudget:
    """Records every call phase (this process's, or on the xdist controller every worker's) and
    fails the run at its end when the slowest exceed the budget."""

    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.calls: dict[str, float] = {}
        self.failure: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.calls[report.nodeid] = report.duration

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.failure = over_budget(self.calls, self.budget)
        if self.failure and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.failure:
            terminalreporter.section("durations budget", red=True, bold=True)
            terminalreporter.line(self.failure)


def pytest_configure(config: pytest.Config) -> None:
    """On the process that sees every report: the xdist controller, or the only process."""
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(DurationsBudget(read_budget()), "durations-budget")
