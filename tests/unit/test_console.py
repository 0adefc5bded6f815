"""The console's per-kind bars and summary: rates and ETAs over the kind's active time."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from runprogress import run_progress

from ferryman_worker import console
from ferryman_worker.contract import KindVerdict, RunProgress, RunState

NOW = datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.UTC)


def _kind(
    name: str, phase: int, tasks: int, done: int, written: int, active: float, tree: bool = False
) -> Any:
    started = NOW - datetime.timedelta(hours=5)  # long ago: the run was paused in between
    return {
        "kind": name,
        "phase": phase,
        "tasks": tasks,
        "done": done,
        "written": written,
        "matched": 0,
        "skipped": 0,
        "failed": 0,
        "first_claim": started,
        "last_finish": NOW if done == tasks else None,
        "active_seconds": active,
        "tree": tree,
    }


def test_rate_and_eta_come_from_the_active_time_not_the_wall_clock() -> None:
    (line,) = console.kind_lines([_kind("messages", 1, 10, 4, 2000, 20.0, tree=True)], 1, NOW)
    assert "100 rows/s" in line  # 2,000 rows in 20 active seconds, not in five hours
    assert "ETA 0:30" in line  # 6 tasks left at 5 s each
    assert "4/10" in line


def test_a_page_kind_being_listed_has_no_eta_of_its_own() -> None:
    (line,) = console.kind_lines([_kind("people", 1, 10, 4, 2000, 20.0)], 1, NOW)
    assert line.rstrip().endswith("listing")  # its last page is not known: no figure


def test_a_page_kind_whose_source_states_its_total_shows_how_much_of_it_is_listed() -> None:
    row = {**_kind("people", 1, 10, 4, 2000, 20.0), "stated_total": 9000, "listed": 2000}
    (line,) = console.kind_lines([row], 1, NOW)
    assert line.rstrip().endswith("listed 2,000 of 9,000")


def test_a_later_phase_waits_and_a_finished_kind_is_done() -> None:
    later, finished = console.kind_lines(
        [_kind("deals", 2, 5, 0, 0, 0.0), _kind("organizations", 0, 3, 3, 900, 3.0)], 1, NOW
    )
    assert later.rstrip().endswith("waiting")
    assert finished.rstrip().endswith("done") and "300 rows/s" in finished


def _run() -> RunProgress:
    return run_progress(
        id=1,
        name="default/run",
        state=RunState.SUCCEEDED,
        phase=None,
        phase_index=1,
        phases=1,
        tasks_done=3,
        tasks_total=3,
        tasks_running=0,
        started_at=NOW,
        finished_at=NOW,
    )


def test_the_summary_reports_active_seconds_and_rate() -> None:
    run = _run()
    lines = console.summary(run, [_kind("organizations", 0, 3, 3, 900, 3.0)], NOW)
    assert lines[1].split() == [
        "KIND",
        "WRITTEN",
        "MATCHED",
        "SKIPPED",
        "MALFORMED",
        "TASKS",
        "SECONDS",
        "ROWS/S",
        "VERDICT",
    ]
    assert lines[2].split() == ["organizations", "900", "0", "0", "0", "3", "3.0", "300", "-"]


def test_the_summary_shows_matched_records_apart_from_written() -> None:
    kind = {**_kind("organizations", 0, 3, 3, 700, 3.0), "matched": 200, "skipped": 5}
    lines = console.summary(_run(), [kind], NOW)
    assert lines[2].split()[:4] == ["organizations", "700", "200", "5"]


def test_the_summary_shows_each_kinds_verdict_and_a_kind_with_nothing_to_walk() -> None:
    verdicts = (
        KindVerdict("organizations", "reconciled", 900, 900, "listed 900, the source states 900"),
        KindVerdict("messages", "unverified", None, None, "no parents were written"),
    )
    run = dataclasses.replace(_run(), verdicts=verdicts)
    lines = console.summary(run, [_kind("organizations", 0, 3, 3, 900, 3.0)], NOW)
    assert lines[2].split()[-1] == "reconciled"
    assert lines[3].split() == ["messages", "0", "0", "0", "0", "0", "0.0", "0", "unverified"]
    assert "  organizations: reconciled: listed 900, the source states 900" in lines
    assert "  messages: unverified: no parents were written" in lines


def test_the_summary_points_at_the_row_errors_when_rows_were_not_written() -> None:
    run = dataclasses.replace(_run(), rows_failed=1234)
    lines = console.summary(run, [_kind("organizations", 0, 3, 3, 900, 3.0)], NOW)
    assert "1,234 source row(s) not written: `ferryman errors default/run`" in lines[-1]
    assert not any("ferryman errors" in line for line in console.summary(_run(), [], NOW))
