"""The migration report's model: what a run did with each kind of its source, in figures a person
who signs off a customer's migration can check. Its JSON Schema is published
(docs/report.schema.json, ``hack/gen-report-schema``); ``ferryman report --format json`` prints
an instance."""

from __future__ import annotations

import datetime
import json
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

REPORT_VERSION: Final = 1
"""Raised when a figure changes meaning or is removed; a figure added leaves it as it is."""

Count = int
VerdictName = Literal["reconciled", "verified", "unverified", "short", "refused", "pending"]
"""``pending``: the kind's phase has not closed (the run runs, or ended before it)."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Refusal(_Model):
    """Records of a kind refused for one reason: malformed (their model refused them) or
    refused by the database, gone from the source before their body was fetched."""

    reason: str = Field(description="Why, as ferryman recorded it (the first 300 characters).")
    count: Count = Field(description="How many records were refused for it.")
    examples: list[str | None] = Field(
        description="Source ids of the first few (null: a record without an id)."
    )


class Verification(_Model):
    """What a verification of the kind found, listing the source's ids again after the run and
    comparing them with the ledger. Absent until one was made."""

    verified: bool = Field(description="Every id the source lists is in the ledger, and no other.")
    at: datetime.datetime = Field(description="When the verification ended.")
    missing: Count = Field(description="Ids the source lists that the ledger lacks.")
    extra: Count = Field(description="Ids the ledger holds that the source no longer lists.")
    note: str = Field(description="What it rests on, with the first ids of each difference.")


class KindReport(_Model):
    """One kind of the run: what the source said it holds, what the run listed and what became
    of each record listed."""

    kind: str
    phase: int = Field(description="The kind's phase, from 1.")
    walk: Literal["pages", "tree"] = Field(
        description="pages: a listing; tree: children listed per parent."
    )
    stated_total: Count | None = Field(
        description="The least total the source stated for the kind's listing (null: it states"
        " none, or a tree kind, whose totals are per parent)."
    )
    listed: Count | None = Field(
        description="Records the listing returned (null: a tree kind, reconciled per parent)."
    )
    written: Count = Field(description="Records written as new rows.")
    matched: Count = Field(
        description="Records matched by the mapping's natural key to rows the application"
        " already had (the ledger names those rows; updated or left as they were)."
    )
    skipped: Count = Field(
        description="Records listed that the ledger held already: written by an earlier run, or"
        " listed twice by a walk that drifted. Each source record is written once."
    )
    refused: Count = Field(description="Records not written: malformed or refused.")
    refusals: list[Refusal] = Field(
        description="The refused records by reason, most frequent first (at most 20 reasons)."
    )
    deleted: Count = Field(
        description="Records a delta run found deleted at the source and recorded (tombstones)."
    )
    verdict: VerdictName
    short_by: Count | None = Field(
        description="For a short kind: how many fewer records it listed than the source states."
    )
    note: str | None = Field(description="What the verdict rests on, and the drift it explains.")
    verification: Verification | None = Field(
        default=None, description="The latest verification of the kind (absent: none was made)."
    )


class Totals(_Model):
    """The run's figures, summed over its kinds (as ``ferryman status`` shows them)."""

    written: Count
    matched: Count
    skipped: Count
    refused: Count
    deleted: Count


class MigrationReport(_Model):
    """The migration report of one run."""

    report_version: Literal[1] = REPORT_VERSION
    run: str = Field(description="namespace/name of the run.")
    workspace: str
    provider: str
    mode: Literal["Full", "Delta"]
    state: Literal["Running", "Succeeded", "Failed", "Cancelled"]
    started_at: datetime.datetime
    finished_at: datetime.datetime | None
    generated_at: datetime.datetime = Field(description="When this report was read.")
    error: str | None = Field(description="Why the run failed, when it did.")
    complete: bool = Field(
        description="The run succeeded and no kind is short, refused or pending: every record"
        " the source stated (or, for an unverified kind, listed) is accounted for."
    )
    totals: Totals
    kinds: list[KindReport]


SCHEMA_PATH = "docs/report.schema.json"
"""Where the published schema is kept, from the repository's root (``hack/gen-report-schema``)."""


def schema_text() -> str:
    """The report's JSON Schema (draft 2020-12), as published."""
    found = MigrationReport.model_json_schema(mode="serialization")
    found = {"$schema": "https://json-schema.org/draft/2020-12/schema", **found}
    return json.dumps(found, indent=2) + "\n"
