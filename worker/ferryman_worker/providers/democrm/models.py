"""Source records of the demo CRM as pydantic models: what a well-formed record is. A record
that does not validate is a malformed row: recorded with its reason, never written."""

from __future__ import annotations

import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Str255 = Annotated[str, StringConstraints(max_length=255)]


class Record(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    id: int


class Organization(Record):
    name: Str255
    domain: Str255 | None = None
    created_at: datetime.datetime | None = None
    updated_at: datetime.datetime | None = None


class Person(Record):
    org_id: int | None = None
    name: Str255
    email: Str255 | None = None
    phone: Annotated[str, StringConstraints(max_length=64)] | None = None
    updated_at: datetime.datetime | None = None


class Deal(Record):
    org_id: int | None = None
    person_ids: list[int] = Field(default_factory=list)
    title: Str255
    value: float | None = None
    currency: Annotated[str, StringConstraints(max_length=3)] | None = None
    stage: Annotated[str, StringConstraints(max_length=64)] | None = None
    status: Annotated[str, StringConstraints(max_length=32)] | None = None
    updated_at: datetime.datetime | None = None


class Message(Record):
    deal_id: int
    subject: Str255
    sender: Str255 | None = Field(default=None, alias="from")
    sent_at: datetime.datetime | None = None
    body: str | None = None
