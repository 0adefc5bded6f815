"""The report's words, the same in every format: a kind's verdict, a figure, a moment."""

from __future__ import annotations

import datetime

from ferryman_worker.report.model import KindReport, MigrationReport
from ferryman_worker.wording import duration

COLUMNS = ("stated total", "listed", "written", "matched", "skipped", "refused", "deleted")


def verdict(kind: KindReport) -> str:
    """e.g. ``reconciled``, ``short by 19,000``, ``short by 2, verification: 2 missing, 0
    extra``."""
    words = {
        "short": f"short by {kind.short_by:,}" if kind.short_by is not None else "short",
        "refused": "refused (over its error budget)",
        "pending": "not judged yet (its phase has not closed)",
    }.get(kind.verdict, kind.verdict)
    found = kind.verification
    if found is not None and not found.verified:
        words += f", verification: {found.missing:,} missing, {found.extra:,} extra"
    return words


def figures(kind: KindReport) -> tuple[str, ...]:
    """The kind's figures in ``COLUMNS``' order ("-": the source states none, or a tree kind's
    totals are per parent)."""
    return (
        figure(kind.stated_total),
        figure(kind.listed),
        figure(kind.written),
        figure(kind.matched),
        figure(kind.skipped),
        figure(kind.refused),
        figure(kind.deleted),
    )


def totals(report: MigrationReport) -> tuple[str, ...]:
    found = report.totals
    return ("", "", *(figure(n) for n in (found.written, found.matched, found.skipped)),
            figure(found.refused), figure(found.deleted))  # fmt: skip


def figure(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def moment(at: datetime.datetime | None) -> str:
    return "-" if at is None else at.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def outcome(report: MigrationReport) -> str:
    """One line: whether the run is complete, and why not."""
    if report.complete:
        unverified = [k.kind for k in report.kinds if k.verdict == "unverified"]
        verified = [k.kind for k in report.kinds if k.verdict == "verified"]
        if unverified:
            return (
                "Complete: every record listed is accounted for; the source states no total for "
                + ", ".join(unverified)
                + " (unverified)"
            )
        if verified and len(verified) == len(report.kinds):
            return "Complete: a verification found every id the source lists in the ledger"
        proven = f" (verified id by id: {', '.join(verified)})" if verified else ""
        return "Complete: every kind's listing adds up to what the source states" + proven
    if report.state == "Running":
        return "Not complete yet: the run is still running"
    failing = [k.kind for k in report.kinds if k.verdict in ("short", "refused", "pending")]
    if failing:
        return f"NOT complete: {report.state}; see " + ", ".join(failing)
    return f"NOT complete: the run ended {report.state}"


def took(report: MigrationReport) -> str:
    if report.finished_at is None:
        return f"started {moment(report.started_at)}"
    seconds = (report.finished_at - report.started_at).total_seconds()
    return (
        f"started {moment(report.started_at)}, finished {moment(report.finished_at)}"
        f" ({duration(seconds)})"
    )
