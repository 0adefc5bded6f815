"""The report as plain text, for a terminal or a ticket."""

from __future__ import annotations

from ferryman_worker.report import words
from ferryman_worker.report.model import KindReport, MigrationReport


def lines(report: MigrationReport) -> str:
    """The whole report, newline-terminated."""
    out = [
        f"Migration report: {report.run}",
        f"  workspace {report.workspace}, provider {report.provider}, {report.mode} run",
        f"  {report.state}: {words.took(report)}",
        f"  {words.outcome(report)}",
    ]
    if report.error:
        out.append(f"  error: {report.error}")
    out += ["", *_table(report), ""]
    for kind in report.kinds:
        out += _details(kind)
    out.append(f"Read {words.moment(report.generated_at)}.")
    return "\n".join(out) + "\n"


def _table(report: MigrationReport) -> list[str]:
    header = ("kind", *words.COLUMNS, "verdict")
    rows = [(k.kind, *words.figures(k), words.verdict(k)) for k in report.kinds]
    rows.append(("total", *words.totals(report), ""))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]

    def line(row: tuple[str, ...]) -> str:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(widths[i + 1]) for i, cell in enumerate(row[1:-1])]
        return "  ".join([*cells, row[-1]]).rstrip()

    return [line(tuple(c.upper() for c in header)), *(line(row) for row in rows)]


def _details(kind: KindReport) -> list[str]:
    out = [f"{kind.kind} (phase {kind.phase}, {kind.walk}): {words.verdict(kind)}"]
    if kind.note:
        out.append(f"  {kind.note}")
    if kind.verification is not None:
        out.append(f"  verification {words.moment(kind.verification.at)}: {kind.verification.note}")
    if kind.refused:
        out.append(f"  {kind.refused:,} refused:")
        for refusal in kind.refusals:
            examples = ", ".join("(no id)" if e is None else e for e in refusal.examples)
            out.append(f"    {refusal.count:,} x {refusal.reason}")
            out.append(f"      e.g. {examples}")
        shown = sum(r.count for r in kind.refusals)
        if shown < kind.refused:
            out.append(f"    {kind.refused - shown:,} more, for other reasons (`ferryman errors`)")
    out.append("")
    return out
