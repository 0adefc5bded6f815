"""Windows: the unit of atomicity. A window's rows are written in one transaction together with
the task's checkpoint; each row is isolated.

A record that fails its model is malformed: recorded in ``ferryman_row_errors`` with its reason,
never written, and it claims no ledger slot. The valid records go to the provider's writer in one
statement (the writer skips what the ledger holds and claims the ledger slots of what it writes,
in the same statement). Only if the database refuses that statement is the window's transaction
rolled back and the window written again ``careful``-ly: row by row, one savepoint per row, so the
row the database refuses is rolled back alone and recorded. A careful window of W rows opens W
subtransactions: keep W under PostgreSQL's 64 cached per transaction.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel, TypeAdapter, ValidationError

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.providers import Kind, Provider

LEDGER_KEY = "ferryman_ledger_pkey"


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a window goes: the run, workspace and task it is written for."""

    run_id: int
    task_id: int
    workspace: str
    provider: Provider
    kind: Kind


@dataclasses.dataclass
class Counts:
    written: int = 0
    skipped: int = 0
    failed: int = 0

    def add(self, other: Counts) -> None:
        self.written += other.written
        self.skipped += other.skipped
        self.failed += other.failed


def validate(
    kind: Kind, records: list[dict[str, Any]]
) -> tuple[list[BaseModel], list[tuple[str | None, str]]]:
    """Split records into valid rows (their models) and malformed ones (source id, reason).

    The whole window is validated in one call; only a window with a malformed record is
    validated again record by record, to tell which."""
    try:
        return _adapter(kind.model).validate_python(records), []
    except ValidationError:
        pass
    valid: list[BaseModel] = []
    malformed: list[tuple[str | None, str]] = []
    for record in records:
        try:
            valid.append(kind.model.model_validate(record))
        except ValidationError as exc:
            malformed.append((_source_id(record), _reason(exc)))
    return valid, malformed


@functools.cache
def _adapter(model: type[BaseModel]) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]


REFUSED = (psycopg.DataError, psycopg.IntegrityError)
"""What the database says about a row it will not take (too long, bad value, constraint)."""


def write(
    conn: Connection,
    target: Target,
    valid: list[BaseModel],
    malformed: list[tuple[str | None, str]],
    *,
    careful: bool = False,
) -> Counts:
    """Write one window inside the caller's open transaction; returns what happened to it.

    Not ``careful``: one statement, and a row the database refuses raises one of ``REFUSED``
    (the caller rolls the window back and writes it again carefully)."""
    counts = Counts()
    for source_id, reason in malformed:
        counts.failed += record_error(conn, target, source_id, reason)
    if careful:
        counts.add(_row_by_row(conn, target, valid))
    elif valid:  # all or nothing: a refusal raises (at once, or at a pipeline's sync)
        _execute_insert(conn, target, valid)
        counts.written += len(valid)
    return counts


def record_error(conn: Connection, target: Target, source_id: str | None, reason: str) -> int:
    """Record a malformed row; 1 if recorded now, 0 if it was recorded before (a resume)."""
    cursor = conn.execute(
        queries.get("record_row_error", "engine.sql"),
        {
            "run_id": target.run_id,
            "task_id": target.task_id,
            "kind": target.kind.name,
            "source_id": source_id,
            "reason": reason[:1000],
        },
    )
    return cursor.rowcount


def _row_by_row(conn: Connection, target: Target, rows: list[BaseModel]) -> Counts:
    counts = Counts()
    for row in rows:
        try:
            with conn.transaction():
                written = _insert(conn, target, [row])
            counts.written += written
            counts.skipped += 1 - written
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.constraint_name != LEDGER_KEY:
                counts.failed += record_error(conn, target, _source_id(row), _db_reason(exc))
            else:  # another writer committed this source row first: it is written, once
                counts.skipped += 1
        except REFUSED as exc:
            counts.failed += record_error(conn, target, _source_id(row), _db_reason(exc))
    return counts


def _insert(conn: Connection, target: Target, rows: list[BaseModel]) -> int:
    row = _execute_insert(conn, target, rows).fetchone()
    return int(row["written"]) if row else 0


def _execute_insert(conn: Connection, target: Target, rows: list[BaseModel]) -> Any:
    payload = _adapter(target.kind.model).dump_json(rows)  # the writer's JSON, made in Rust
    return conn.execute(
        target.provider.insert_query(target.kind.name),
        {
            "rows": Jsonb(payload, dumps=_as_is),
            "workspace": target.workspace,
            "kind": target.kind.name,
            "run_id": target.run_id,
        },
    )


def _as_is(payload: Any) -> Any:
    return payload


def _source_id(record: dict[str, Any] | BaseModel) -> str | None:
    value = getattr(record, "id", None) if isinstance(record, BaseModel) else record.get("id")
    return None if value is None else str(value)


def _reason(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "record"
        parts.append(f"{field}: {error['msg']}")
    return "; ".join(parts)


def _db_reason(exc: Exception) -> str:
    text = str(exc).strip()
    return "database refused the row: " + (text.splitlines()[0] if text else type(exc).__name__)
