"""A task's failure named by its cause, from the error text the queue keeps."""

from __future__ import annotations

import datetime

import pytest

from ferryman_worker.engine import causes

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (
            "CredentialUnavailable: the provider's auth style 'basic' needs ...",
            "CredentialUnavailable",
        ),
        ("task 12 failed: SourceRefused: listing people: HTTP 401 Unauthorized", "SourceRefused"),
        ("TokenRefused: credential 3: the token endpoint refused the grant", "SourceRefused"),
        ('UndefinedTable: relation "crm_people" does not exist', "TableMissing"),
        ('UndefinedColumn: column "email" does not exist', "ColumnMissing"),
        ("InsufficientPrivilege: permission denied for table crm_people", "DatabaseRefused"),
        ("SourceError: listing people: HTTP 503 Service Unavailable", None),
        ("SourceTimeout: listing people took longer than 30s", None),
        ("not every record was imported: people: listed 30 of the 121", None),
        ("", None),
        (None, None),
    ],
)
def test_a_failure_is_named_by_its_cause_or_not_at_all(
    error: str | None, cause: str | None
) -> None:
    assert causes.named(error) == cause


def test_the_retrying_line_leads_with_the_cause_it_names() -> None:
    row = {
        "tasks": 1,
        "kind": "people",
        "task_id": 4,
        "attempts": 1,
        "max_attempts": 25,
        "run_at": NOW + datetime.timedelta(seconds=30),
        "last_error": "CredentialUnavailable: the provider's auth style 'basic' needs the"
        " credential keys ['password']",
    }
    line = causes.retrying_line(row, NOW).strip()
    assert line.startswith("CredentialUnavailable (the source credential")
    assert "retrying 1 task(s)" in line and "['password']" in line
    plain = causes.retrying_line({**row, "last_error": "SourceError: HTTP 503"}, NOW).strip()
    assert plain.startswith("retrying 1 task(s)")
