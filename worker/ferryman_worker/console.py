"""Progress and summaries for people: the live bars of ``ferryman run`` and ``ferryman status``.

Pure formatting from the engine's aggregate rows; no database access here."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from ferryman_worker import eta
from ferryman_worker.contract import KindVerdict, RunProgress, Verification
from ferryman_worker.eta import Estimate
from ferryman_worker.wording import duration

BAR = 28


def _elapsed(
    start: datetime.datetime | None, end: datetime.datetime | None, now: datetime.datetime
) -> float | None:
    if start is None:
        return None
    return ((end or now) - start).total_seconds()


def headline(run: RunProgress, now: datetime.datetime) -> str:
    state = "Suspended" if run.suspended and not run.state.finished else run.state.value
    phase = f"phase {min(run.phase_index + 1, run.phases)}/{run.phases}"
    if run.phase:
        phase += f" ({run.phase})"
    return (
        f"{run.name}  workspace {run.workspace}  {state}  {phase}  "
        f"tasks {run.tasks_done}/{run.tasks_total}  rows {run.rows_written:,}  "
        f"elapsed {duration(_elapsed(run.started_at, run.finished_at, now))}"
    )


def kind_lines(
    kinds: Sequence[dict[str, Any]], open_phase: int, now: datetime.datetime
) -> list[str]:
    """One bar per kind: rows, tasks done/total, rate and ETA (a tree kind's from its tasks' own
    pace, over the time the kind was active: a suspension does not count; a page kind's listing
    is as long as the total its source states, else unknown until its last page: ``listing``)."""
    lines = []
    for row in kinds:
        tasks, done = int(row["tasks"]), int(row["done"])
        written = int(row["written"] or 0)
        active = float(row["active_seconds"] or 0.0)
        rate = written / active if active else 0.0
        filled = int(BAR * done / tasks) if tasks else 0
        if done == tasks:
            left = "done"
        elif row["phase"] > open_phase:
            left = "waiting"
        elif not row.get("tree") and row.get("stated_total") is not None:
            left = f"listed {int(row['listed'] or 0):,} of {int(row['stated_total']):,}"
        elif not row.get("tree"):
            left = "listing"
        elif not done or not active:
            left = "ETA -"
        else:
            left = f"ETA {duration(active / done * (tasks - done))}"
        lines.append(
            f"  {row['kind']:<14} [{'#' * filled:<{BAR}}] {written:>9,} rows "
            f"{done:>5}/{tasks:<5} tasks  {rate:>8,.0f} rows/s  {left}"
        )
    return lines


def summary(
    run: RunProgress,
    kinds: Sequence[dict[str, Any]],
    now: datetime.datetime,
    ferryman: str = "ferryman",
) -> list[str]:
    """The table printed when a run ends; ``ferryman`` is how the commands it suggests call
    ferryman (see ``localrun.command``)."""
    header = (
        f"{'KIND':<14} {'WRITTEN':>10} {'MATCHED':>8} {'SKIPPED':>8} {'MALFORMED':>9} {'TASKS':>6} "
        f"{'SECONDS':>8} {'ROWS/S':>8}  VERDICT"
    )
    lines = [headline(run, now), header]
    verdicts = {found.kind: found for found in run.verdicts}
    for row in kinds:
        elapsed = float(row["active_seconds"] or 0.0)
        written = int(row["written"] or 0)
        verdict = verdicts.get(row["kind"])
        lines.append(
            f"{row['kind']:<14} {written:>10,} {int(row.get('matched') or 0):>8,}"
            f" {int(row['skipped'] or 0):>8,} "
            f"{int(row['failed'] or 0):>9,} {int(row['tasks']):>6} {elapsed:>8.1f} "
            f"{(written / elapsed if elapsed else 0):>8,.0f}  {verdict.verdict if verdict else '-'}"
        )
    listed = {row["kind"] for row in kinds}
    for found in run.verdicts:  # a kind with nothing to walk (a tree kind without parents)
        if found.kind not in listed:
            lines.append(f"{found.kind:<14} {0:>10} {0:>8} {0:>8} {0:>9} {0:>6} {0:>8.1f} {0:>8}  "
                         f"{found.verdict}")  # fmt: skip
    lines.extend(verdict_lines(run.verdicts))
    lines.extend(verification_lines(run.verification))
    if run.rows_failed:
        lines.append(
            f"{run.rows_failed:,} source row(s) not written: `{ferryman} errors {run.name}` lists"
            " them with their reasons"
        )
    if run.error:
        lines.append(f"error: {run.error}")
    return lines


def verdict_lines(verdicts: Sequence[KindVerdict]) -> list[str]:
    """What each kind's verdict rests on, one line each (a failed kind's is the run's error)."""
    return [
        f"  {found.kind}: {found.verdict}: {found.note}" for found in verdicts if not found.failed
    ]


def verification_lines(found: Verification | None) -> list[str]:
    """The run's verification: its verdict, then each kind's (``verified``, or ``differs``
    with its missing and gone ids); nothing when none was asked for."""
    if found is None:
        return []
    lines = [f"verification: {found.line()}"]
    if found.verdict in ("verified", "differs"):
        lines.extend(f"  {kind.line()}" for kind in found.kinds)
    return lines


def eta_lines(found: Estimate) -> list[str]:
    """The ETA of each phase still to do (when more than one) and of the run, e.g. ``ETA 2:10:00
    for the run (bound by the source's rate limit: 1,930,000 tokens at 250/s)``
    (``eta.estimate``)."""
    phases = eta.phase_lines(found) if len(found.parts) > 1 else []
    return [f"  {line}" for line in [*phases, eta.run_line(found)]]
