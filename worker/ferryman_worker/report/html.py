"""The report as one self-contained HTML page: inline CSS, no scripts, no fonts, images or links
to fetch, so that it reads the same offline, attached to a ticket or sent to a customer. Every
value is escaped."""

from __future__ import annotations

from html import escape

from ferryman_worker.report import words
from ferryman_worker.report.model import KindReport, MigrationReport

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: #1d2430; margin: 2rem auto; max-width: 72rem; padding: 0 1.5rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; }
h2 { font-size: 1.1rem; margin: 2rem 0 .4rem; }
.meta { color: rgb(86 96 114); margin: 0; }
.outcome { margin: 1rem 0; padding: .7rem 1rem; border-radius: 6px; font-weight: 600; }
.complete { background: #e6f4ea; color: #17622f; }
.incomplete { background: #fdecea; color: #8a1c13; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; }
th, td { padding: .35rem .6rem; border-bottom: 1px solid #dde2ea; text-align: right; }
th { background: #f3f5f8; font-weight: 600; white-space: nowrap; }
th:first-child, td:first-child, td.verdict, th.verdict { text-align: left; }
tr.total td { font-weight: 600; border-top: 2px solid #b9c1ce; }
.tag { display: inline-block; padding: 0 .45rem; border-radius: 4px; font-size: .85rem; }
.reconciled, .verified { background: #e6f4ea; color: #17622f; }
.unverified { background: #fff4d6; color: #6b4e00; }
.short, .refused, .pending { background: #fdecea; color: #8a1c13; }
.note { color: rgb(55 65 81); margin: .2rem 0; }
.reason td, .legend td, .reasons th { text-align: left; vertical-align: top; }
.reasons th:first-child { text-align: right; width: 6rem; }
.reason td.count { text-align: right; white-space: nowrap; }
code { font: 13px ui-monospace, SFMono-Regular, Menlo, monospace; }
footer { color: rgb(86 96 114); font-size: .85rem; margin-top: 2rem; }
"""


def page(report: MigrationReport) -> str:
    """The whole page."""
    done = "complete" if report.complete else "incomplete"
    error = f"<p class='meta'>Error: {escape(report.error)}</p>" if report.error else ""
    parts = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>Migration report: {escape(report.run)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Migration report: {escape(report.run)}</h1>",
        f"<p class='meta'>Workspace <b>{escape(report.workspace)}</b> · provider"
        f" <b>{escape(report.provider)}</b> · {escape(report.mode)} run ·"
        f" {escape(report.state)}</p>",
        f"<p class='meta'>{escape(words.took(report))}</p>",
        error,
        f"<p class='outcome {done}'>{escape(words.outcome(report))}</p>",
        _table(report),
        *(_kind(kind) for kind in report.kinds),
        _legend(),
        f"<footer>Read {escape(words.moment(report.generated_at))} by ferryman"
        f" (report version {report.report_version}).</footer>",
        "</body></html>",
    ]
    return "\n".join(part for part in parts if part) + "\n"


def _table(report: MigrationReport) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in ("kind", *words.COLUMNS))
    rows = [
        "<tr>"
        + f"<td>{escape(k.kind)}</td>"
        + "".join(f"<td>{escape(f)}</td>" for f in words.figures(k))
        + f"<td class='verdict'>{_tag(k)}</td></tr>"
        for k in report.kinds
    ]
    total = "".join(f"<td>{escape(f)}</td>" for f in words.totals(report))
    rows.append(f"<tr class='total'><td>total</td>{total}<td></td></tr>")
    return (
        f"<table><thead><tr>{head}<th class='verdict'>verdict</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _tag(kind: KindReport) -> str:
    return f"<span class='tag {escape(kind.verdict)}'>{escape(words.verdict(kind))}</span>"


def _kind(kind: KindReport) -> str:
    parts = [
        f"<h2>{escape(kind.kind)} <small class='meta'>phase {kind.phase},"
        f" {escape(kind.walk)}</small> {_tag(kind)}</h2>"
    ]
    if kind.note:
        parts.append(f"<p class='note'>{escape(kind.note)}</p>")
    if kind.verification is not None:
        found = kind.verification
        parts.append(
            f"<p class='note'>Verification {escape(words.moment(found.at))}:"
            f" {escape(found.note)}</p>"
        )
    if kind.refused:
        rows = "".join(
            "<tr class='reason'>"
            f"<td class='count'>{r.count:,}</td><td>{escape(r.reason)}</td>"
            f"<td><code>{escape(', '.join('(no id)' if e is None else e for e in r.examples))}"
            "</code></td></tr>"
            for r in kind.refusals
        )
        shown = sum(r.count for r in kind.refusals)
        more = (
            f"<p class='note'>{kind.refused - shown:,} more, for other reasons.</p>"
            if shown < kind.refused
            else ""
        )
        parts.append(
            f"<p class='note'>{kind.refused:,} record(s) not written, by reason:</p>"
            "<table class='reasons'><thead><tr><th>records</th><th>reason</th>"
            "<th>source ids (first few)</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>{more}"
        )
    return "\n".join(parts)


LEGEND = (
    ("stated total", "what the source said it holds (the least total its answers stated)"),
    ("listed", "records the run's listing returned"),
    ("written", "records written as new rows"),
    ("matched", "records matched by the mapping's natural key to rows the application had"),
    ("skipped", "records the ledger held already: each source record is written once"),
    ("refused", "records not written: malformed, or refused by the database"),
    ("deleted", "records a delta run found deleted at the source"),
    ("reconciled", "the listing adds up to the source's stated total"),
    ("verified", "a verification listed the source's ids again: each is in the ledger"),
    ("unverified", "the source states no total: every record listed is accounted for"),
    ("short by N", "the listing returned N fewer records than the source states"),
)


def _legend() -> str:
    rows = "".join(f"<tr><td>{escape(a)}</td><td>{escape(b)}</td></tr>" for a, b in LEGEND)
    return f"<h2>What the figures mean</h2><table class='legend'><tbody>{rows}</tbody></table>"
