"""The migration report of a run: per kind, what the source said it holds, what the run listed,
and what became of each record (written, matched, skipped, refused by reason, deleted), with the
kind's verdict. ``build`` reads it (the same figures ``ferryman status`` shows, and the row
errors grouped by reason); ``render`` prints it as text, JSON or one self-contained HTML page.

A kind's verification (the source's ids listed again after the run and compared with the
ledger: ``ferryman verify``) is shown once the run's latest one is done; its verdict is already
in the kind's (``verified``, or ``short`` by the ids the ledger lacks).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Literal

from ferryman_worker import contract
from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.engine import delta, runs
from ferryman_worker.errors import FerrymanError
from ferryman_worker.providers import of_run
from ferryman_worker.report import html, text
from ferryman_worker.report.model import (
    KindReport,
    MigrationReport,
    Refusal,
    Totals,
    Verification,
)

__all__ = ["FORMATS", "MigrationReport", "Verification", "build", "render"]

Format = Literal["text", "json", "html"]
FORMATS: tuple[Format, ...] = ("text", "json", "html")

REASONS = 20
"""Reasons shown per kind, most frequent first."""
EXAMPLES = 5
"""Example source ids shown per reason."""


def build(conn: Connection, name: str, now: datetime.datetime) -> MigrationReport:
    """The report of the run called ``name`` (namespace/name); FerrymanError if there is none."""
    run = runs.by_name(conn, name)
    found = contract.progress(conn, name)
    if run is None or not found:
        raise FerrymanError(f"report: no run named {name!r} (use namespace/name)")
    progress = found[0]
    run_id = int(run["id"])
    kinds = {row["kind"]: row for row in runs.kind_progress(conn, run_id)}
    refusals = _refusals(conn, run_id)
    deleted = _deleted(conn, run_id) if delta.is_delta(run) else {}
    verdicts = {found.kind: found for found in progress.verdicts}
    verifications = _verifications(progress.verification)
    provider = of_run(run)
    reports = []
    for phase, names in enumerate(run["phases"], start=1):
        for kind in names:
            reports.append(
                _kind(
                    kind,
                    phase,
                    provider.kinds[kind].walk,
                    kinds.get(kind, {}),
                    verdicts.get(kind),
                    refusals.get(kind, []),
                    deleted.get(kind, 0),
                    verifications.get(kind),
                )
            )
    return MigrationReport(
        run=progress.name,
        workspace=progress.workspace,
        provider=str(run["provider"]),
        mode="Delta" if delta.is_delta(run) else "Full",
        state=progress.state.value,  # type: ignore[arg-type]
        started_at=progress.started_at,
        finished_at=progress.finished_at,
        generated_at=now,
        error=progress.error,
        complete=progress.state is contract.RunState.SUCCEEDED
        and all(k.verdict in ("reconciled", "verified", "unverified") for k in reports),
        totals=Totals(
            written=progress.rows_written,
            matched=progress.rows_matched,
            skipped=progress.rows_skipped,
            refused=progress.rows_failed,
            deleted=sum(deleted.values()),
        ),
        kinds=reports,
    )


def render(report: MigrationReport, fmt: Format) -> str:
    """The report as ``fmt``: text for a terminal, JSON for machines, or an HTML page."""
    if fmt == "json":
        return report.model_dump_json(indent=2) + "\n"
    if fmt == "html":
        return html.page(report)
    return text.lines(report)


def _kind(
    kind: str,
    phase: int,
    walk: str,
    row: Mapping[str, Any],
    verdict: contract.KindVerdict | None,
    refusals: list[Refusal],
    deleted: int,
    verification: Verification | None,
) -> KindReport:
    tree = walk == "tree"
    if verdict is not None:
        listed, total = verdict.listed, verdict.total
    else:  # its phase has not closed: what its pages listed so far
        listed = None if tree else int(row.get("listed") or 0)
        stated = row.get("stated_total")
        total = None if tree or stated is None else int(stated)
    return KindReport(
        kind=kind,
        phase=phase,
        walk="tree" if tree else "pages",
        stated_total=total,
        listed=listed,
        written=int(row.get("written") or 0),
        matched=int(row.get("matched") or 0),
        skipped=int(row.get("skipped") or 0),
        refused=int(row.get("failed") or 0),
        refusals=refusals,
        deleted=deleted,
        verdict=verdict.verdict if verdict is not None else "pending",
        short_by=verdict.shortfall if verdict is not None else None,
        note=verdict.note if verdict is not None else None,
        verification=verification,
    )


def _verifications(found: contract.Verification | None) -> dict[str, Verification]:
    """Each kind's check of the run's latest verification, once it is done."""
    if found is None or found.state != "done" or found.finished_at is None:
        return {}
    return {
        check.kind: Verification(
            verified=check.verdict == "verified",
            at=found.finished_at,
            missing=check.missing,
            extra=check.gone,
            note=check.line(),
        )
        for check in found.kinds
    }


def _refusals(conn: Connection, run_id: int) -> dict[str, list[Refusal]]:
    params = {"run_id": run_id, "reasons": REASONS, "examples": EXAMPLES}
    found: dict[str, list[Refusal]] = {}
    for row in conn.execute(queries.get("report_refusals", "report.sql"), params):
        refusal = Refusal(reason=row["reason"], count=int(row["n"]), examples=row["examples"])
        found.setdefault(row["kind"], []).append(refusal)
    return found


def _deleted(conn: Connection, run_id: int) -> dict[str, int]:
    rows = conn.execute(queries.get("report_deleted", "report.sql"), {"run_id": run_id})
    return {row["kind"]: int(row["deleted"]) for row in rows}
