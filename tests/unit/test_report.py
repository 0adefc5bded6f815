"""The migration report's renderings, from a report model (pure logic; the figures themselves
are tested against a real run in tests/integration/test_report.py)."""

from __future__ import annotations

import datetime
import json
import pathlib

import jsonschema

from ferryman_worker import report
from ferryman_worker.report import model

ROOT = pathlib.Path(__file__).resolve().parents[2]
T0 = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
HOSTILE = "<script>fetch('https://evil.example/x')</script><img src=https://evil.example/y>"


def _report(**kind_changes: object) -> model.MigrationReport:
    kind = {
        "kind": "organizations",
        "phase": 1,
        "walk": "pages",
        "stated_total": 1040,
        "listed": 40,
        "written": 38,
        "matched": 0,
        "skipped": 0,
        "refused": 2,
        "refusals": [model.Refusal(reason=HOSTILE, count=2, examples=["<b>7</b>", None])],
        "deleted": 0,
        "verdict": "short",
        "short_by": 1000,
        "note": HOSTILE,
        **kind_changes,
    }
    return model.MigrationReport(
        run="default/<acme>",
        workspace="acme",
        provider="democrm",
        mode="Full",
        state="Failed",
        started_at=T0,
        finished_at=T0 + datetime.timedelta(minutes=3),
        generated_at=T0 + datetime.timedelta(minutes=4),
        error=HOSTILE,
        complete=False,
        totals=model.Totals(written=38, matched=0, skipped=0, refused=2, deleted=0),
        kinds=[model.KindReport.model_validate(kind)],
    )


def test_the_published_schema_is_the_models() -> None:
    """docs/report.schema.json is generated (hack/gen-report-schema): run it after a change."""
    assert (ROOT / model.SCHEMA_PATH).read_text() == model.schema_text()


def test_the_json_rendering_validates_against_the_published_schema() -> None:
    schema = json.loads((ROOT / model.SCHEMA_PATH).read_text())
    found = json.loads(report.render(_report(), "json"))
    jsonschema.Draft202012Validator(schema).validate(found)
    assert found["kinds"][0]["verification"] is None  # absent until a verification is made


def test_the_html_page_escapes_what_the_source_and_database_said() -> None:
    page = report.render(_report(), "html")
    assert "<script" not in page and "<img" not in page and "<b>7</b>" not in page
    assert "&lt;script&gt;" in page and "default/&lt;acme&gt;" in page
    assert "short by 1,000" in page


def test_a_verification_shows_with_the_verdict() -> None:
    proven = model.Verification(verified=True, at=T0, missing=0, extra=0, note="all 40 ids")
    text = report.render(_report(verdict="verified", short_by=None, verification=proven), "text")
    assert "verification 2026-12-01 12:00:00 UTC: all 40 ids" in text
    assert "verified, verification" not in text  # a clean verification is the verdict itself
    found = model.Verification(verified=False, at=T0, missing=3, extra=1, note="first: 7, 9, 12")
    text = report.render(_report(verification=found), "text")
    assert "short by 1,000, verification: 3 missing, 1 extra" in text
