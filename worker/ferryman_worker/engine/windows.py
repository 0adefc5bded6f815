"""Windows: the unit of atomicity. A window's rows are written in one transaction together with
the task's checkpoint; each row is isolated.

A record that fails its model is malformed: recorded in ``ferryman_row_errors`` with its reason,
never written, and it claims no ledger slot. A window is normally ONE statement: the kind's
writer (rows and their ledger slots; see ``destinations``), then ``ferryman_close_window`` (row
errors, checkpoint, and the gate, which raises when the task is no longer ours or its run no
longer runs), committed on its own. Only if the database refuses the writer (a value out of
range, a ledger slot already taken) is the window written again ``carefully``, inside a
transaction: row by row, one savepoint per row, so the row the database refuses is rolled back
alone and recorded. A careful window of W rows (a delta's tombstones included) opens W
subtransactions: keep W under PostgreSQL's 64 cached per transaction.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel, TypeAdapter, ValidationError

from ferryman_worker.db import queries
from ferryman_worker.destinations import Writer
from ferryman_worker.errors import MappingRefused
from ferryman_worker.providers import Kind

LEDGER_KEY = "ferryman_ledger_pkey"
GATE_CLOSED = "FM001"
"""SQLSTATE raised by ``ferryman_close_window`` when the window may not commit."""

REFUSED = (psycopg.DataError, psycopg.IntegrityError)
"""What the database says about a row it will not take (too long, bad value, constraint)."""


class Closed(Exception):
    """The gate refused the window: the task is no longer this job's, or its run is no longer
    running. Nothing of the window was written."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a window goes: the run, workspace, task and claiming job it is written for."""

    run_id: int
    task_id: int
    job_id: int
    workspace: str
    kind: Kind
    writer: Writer
    commit: str | None = None
    """How each window's transaction commits: 'off' (asynchronously: a database crash may lose
    the last windows, whose checkpoints go with them, so the task writes them again), or None
    (as the connection's session says)."""


@dataclasses.dataclass
class Counts:
    """A window's records by outcome: written (new rows), skipped (the ledger held them),
    failed (row errors recorded now) and matched (by the kind's natural key, to rows the
    application already had: their ledger slots name those rows)."""

    written: int = 0
    skipped: int = 0
    failed: int = 0
    matched: int = 0


Malformed = list[tuple[str | None, str]]
"""Rows that are not written, as (source id, reason)."""


@dataclasses.dataclass(frozen=True)
class Window:
    """A window to write: its valid rows, its malformed ones, the checkpoint after it."""

    offset: int
    valid: list[BaseModel]
    malformed: Malformed
    deleted: list[str] = dataclasses.field(default_factory=list)
    """Source ids of records a delta's listing says were deleted (tombstones): recorded in
    the ledger by the window's statement, nothing written."""
    skipped: int = 0
    """Records the caller left out because the ledger holds them already (a tree's children
    are not fetched again): counted as skipped with the window."""


def validate(kind: Kind, records: list[dict[str, Any]]) -> tuple[list[BaseModel], Malformed]:
    """Split records into valid rows (their models) and malformed ones (source id, reason).

    The whole window is validated in one call; only a window with a malformed record is
    validated again record by record, to tell which."""
    try:
        return _adapter(kind.model).validate_python(records), []
    except ValidationError:
        pass
    valid: list[BaseModel] = []
    malformed: Malformed = []
    for record in records:
        try:
            valid.append(kind.model.model_validate(record))
        except ValidationError as exc:
            malformed.append((record_id(record, kind.id), _reason(exc)))
    return valid, malformed


def split(records: Sequence[Any], size: int) -> Iterator[list[Any]]:
    """Consecutive windows of at most ``size`` records."""
    for start in range(0, len(records), size):
        yield list(records[start : start + size])


@functools.cache
def _adapter(model: type[BaseModel]) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]


Cursor = psycopg.Cursor[tuple[Any, ...]]
"""Windows are written through a tuple-row cursor kept for the task (cheaper per statement)."""


def write(cur: Cursor, target: Target, window: Window) -> Counts:
    """The window in one statement, with its checkpoint: committed on its own on an
    autocommit connection, or part of the caller's open transaction.

    Raises one of ``REFUSED`` if the database refuses a row (nothing written: write the window
    ``carefully``), ``Closed`` if the gate refuses the window."""
    params = _close_params(target, window, [])
    params["rows"] = _rows(target, window.valid)
    params["deleted"] = window.deleted
    with _gate():
        row = cur.execute(
            target.writer.window_statement(),
            params,
            binary=True,
        ).fetchone()
    assert row is not None
    failed, written, matched = row
    skipped = len(window.valid) - written - matched + window.skipped
    return Counts(written=written, skipped=skipped, failed=failed, matched=matched)


def holds_known(exc: Exception) -> bool:
    """Whether the database refused a window because the ledger holds one of its records (a
    re-run, a retried or resumed task): ``without_known`` then leaves them out."""
    return (
        isinstance(exc, psycopg.errors.UniqueViolation) and exc.diag.constraint_name == LEDGER_KEY
    )


def without_known(cur: Cursor, target: Target, window: Window) -> Window:
    """The window without the records the ledger already holds for the run's workspace and
    kind (one index probe per record, in one statement), counted in ``skipped``: a window of a
    re-run stays one statement instead of one savepoint per record. The ledger's key still
    refuses a record written in between (the window then goes ``carefully``)."""
    ids = [record_id(model, target.kind.id) for model in window.valid]
    held = _held(cur, target, ids)
    if not held:
        return window
    valid = [m for m, source_id in zip(window.valid, ids, strict=True) if source_id not in held]
    return dataclasses.replace(
        window, valid=valid, skipped=window.skipped + len(window.valid) - len(valid)
    )


def to_write(cur: Cursor, target: Target, records: Sequence[Any]) -> list[bool]:
    """Per record (as listed: before validation), whether it is still to write: False when the
    ledger holds its source id for the run's workspace and kind already. One statement, one
    probe of the ledger's key per id; it returns only the ids still to write (in a re-run,
    none), sent as one JSON array (psycopg composes a text array in Python, a JSON one in C)."""
    ids = [record_id(record, target.kind.id) for record in records]
    present = [source_id for source_id in ids if source_id is not None]
    if not present:
        return [True] * len(ids)
    params = {"workspace": target.workspace, "kind": target.kind.name, "source_ids": Jsonb(present)}
    unwritten = {row[0] for row in cur.execute(queries.engine("ledger_unwritten"), params)}
    return [source_id is None or source_id in unwritten for source_id in ids]


def _held(cur: Cursor, target: Target, ids: list[str | None]) -> set[str]:
    present = [source_id for source_id in ids if source_id is not None]
    if not present:
        return set()
    params = {"workspace": target.workspace, "kind": target.kind.name, "source_ids": present}
    return {row[0] for row in cur.execute(queries.engine("ledger_written"), params)}


def write_carefully(cur: Cursor, target: Target, window: Window) -> Counts:
    """The window row by row, one savepoint each, inside the caller's open transaction: a row
    the database refuses is recorded alone, a row the ledger holds is skipped. Raises
    ``Closed`` if the gate refuses the window."""
    counts = Counts(skipped=window.skipped)
    refused: Malformed = []
    for source_id in window.deleted:  # the tombstones first, each alone: a row the database
        try:  # refuses to delete (a foreign key) is a row error, its deletion not noted
            with cur.connection.transaction():
                _write_row(cur, target, None, [source_id])
        except REFUSED as exc:
            refused.append((source_id, _db_reason(exc)))
    for model in window.valid:
        try:
            with cur.connection.transaction():
                written, matched = _write_row(cur, target, model)
            counts.written += written
            counts.matched += matched
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.constraint_name == LEDGER_KEY:  # written once, before: skip it
                counts.skipped += 1
            else:
                refused.append((record_id(model, target.kind.id), _db_reason(exc)))
        except REFUSED as exc:
            _mapping_at_fault(target, exc)
            refused.append((record_id(model, target.kind.id), _db_reason(exc)))
    params = _close_params(target, window, refused)
    params.update(written=counts.written, skipped=counts.skipped, matched=counts.matched)
    with _gate():
        row = cur.execute(queries.engine("close_window"), params).fetchone()
    assert row is not None
    counts.failed = row[0]
    return counts


def _write_row(
    cur: Cursor, target: Target, model: BaseModel | None, deleted: list[str] | None = None
) -> tuple[int, int]:
    """The rows written and matched (a provider's SQL function says only the former)."""
    row = cur.execute(
        target.writer.rows_statement(),
        {
            "rows": _rows(target, [] if model is None else [model]),
            "workspace": target.workspace,
            "kind": target.kind.name,
            "run_id": target.run_id,
            "deleted": deleted or [],
        },
    ).fetchone()
    if not row:
        return 0, 0
    return int(row[0]), int(row[1]) if len(row) > 1 else 0


def _close_params(target: Target, window: Window, refused: Malformed) -> dict[str, Any]:
    malformed = [*window.malformed, *refused]
    return {
        "task_id": target.task_id,
        "job_id": target.job_id,
        "run_id": target.run_id,
        "workspace": target.workspace,
        "kind": target.kind.name,
        "offset": window.offset,
        "skipped": window.skipped,
        "commit": target.commit,
        "errors": Jsonb([{"source_id": s, "reason": r[:1000]} for s, r in malformed])
        if malformed
        else None,
    }


def _rows(target: Target, models: list[BaseModel]) -> Jsonb:
    payload = _adapter(target.kind.model).dump_json(models)  # the writer's JSON, made in Rust
    return Jsonb(payload, dumps=_as_is)


@contextlib.contextmanager
def _gate() -> Iterator[None]:
    try:
        yield
    except psycopg.Error as exc:
        if exc.sqlstate == GATE_CLOSED:
            raise Closed(str(exc)) from exc
        raise


def _as_is(payload: Any) -> Any:
    return payload


def record_id(record: Any, field: str) -> str | None:
    """The record's id, when it has one (a listing's item may not even be an object)."""
    if isinstance(record, BaseModel):
        value = getattr(record, field, None)
    else:
        value = record.get(field) if isinstance(record, dict) else None
    return None if value is None else str(value)


SOURCE_ID_SLOTS = ("ferryman_ledger", "ferryman_landing")
"""The tables whose source_id the writer fills from the mapping's sourceId."""


def _mapping_at_fault(target: Target, exc: Exception) -> None:
    """MappingRefused when the database refused a row for the mapping's fault, not the
    record's: its ledger slot without a source id (the mapping's sourceId names no field of
    the records; a record without its id is malformed before it is written)."""
    diag = getattr(exc, "diag", None)
    if (
        isinstance(exc, psycopg.errors.NotNullViolation)
        and diag is not None
        and diag.table_name in SOURCE_ID_SLOTS
        and diag.column_name == "source_id"
    ):
        raise MappingRefused(
            f"{target.kind.name}: the record's source id is null in the ledger: the run's"
            f" sourceId for {target.kind.name} names no field its records carry (the provider"
            f" declares its id as {target.kind.id!r}): set the mapping's"
            f" kinds.{target.kind.name}.sourceId to {target.kind.id_pointer} (`ferryman mapping"
            " check --provider` names every pointer that cannot resolve), then run it again"
        ) from exc


def _reason(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "record"
        parts.append(f"{field}: {error['msg']}")
    return "; ".join(parts)


def _db_reason(exc: Exception) -> str:
    text = str(exc).strip()
    return "database refused the row: " + (text.splitlines()[0] if text else type(exc).__name__)
