"""Putting jobs on the queue: one, or many in one statement.

Given an open connection, the insert joins its transaction: the job exists, and its queue's
workers are notified, only when that transaction commits. Without one, the default database
(``configure``) is used in autocommit. Inside ``batch(...)``, or inside a job that is itself a
batch member, new jobs join that batch.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from psycopg.types.json import Jsonb

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.errors import QueueError
from ferryman_worker.queue.registry import Job, JobCall


class ConnectionSource(Protocol):
    """Anything that lends connections: a psycopg_pool pool."""

    def connection(self) -> contextlib.AbstractContextManager[Connection]: ...


_default_source: ConnectionSource | None = None
current_batch: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "ferryman_current_batch", default=None
)


def configure(source: ConnectionSource | None) -> None:
    """Set the database used by enqueues that are given no connection (None: unset)."""
    global _default_source
    _default_source = source


@contextlib.contextmanager
def borrowed(conn: Connection | None) -> Iterator[Connection]:
    """``conn`` itself, or a connection from the default source."""
    if conn is not None:
        yield conn
        return
    if _default_source is None:
        raise QueueError(
            "no database to enqueue into: pass conn=..., or call "
            "ferryman_worker.queue.configure(...) first (workers do this for their jobs)"
        )
    with _default_source.connection() as lent:
        yield lent


def enqueue(
    target: Job[Any, Any] | JobCall, *args: Any, conn: Connection | None = None, **kwargs: Any
) -> int:
    """Enqueue one job; returns its id. ``target`` is a job (then give its arguments here) or
    a ``JobCall`` from ``job.call(...)``."""
    if isinstance(target, JobCall):
        if args or kwargs:
            raise QueueError(
                "enqueue(job.call(...)) takes no further arguments: put them in call()"
            )
        call = target
    else:
        call = target.call(*args, **kwargs)
    return enqueue_many([call], conn=conn)[0]


def enqueue_many(calls: Iterable[JobCall], *, conn: Connection | None = None) -> list[int]:
    """Enqueue many jobs in one statement; returns their ids in order."""
    columns = _columns(list(calls), current_batch.get())
    if not columns["name"]:
        return []
    with borrowed(conn) as lent:
        rows = lent.execute(queries.get("enqueue"), columns).fetchall()
    return [int(row["id"]) for row in rows]


def _columns(calls: list[JobCall], batch_id: int | None) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {
        key: []
        for key in (
            "queue",
            "name",
            "args",
            "kwargs",
            "priority",
            "run_at",
            "max_attempts",
            "concurrency_key",
            "batch_id",
            "tenant",
        )
    }
    for call in calls:
        options = call.options
        columns["queue"].append(options.queue)
        columns["name"].append(call.name)
        columns["args"].append(Jsonb(list(call.args)))
        columns["kwargs"].append(Jsonb(call.kwargs))
        columns["priority"].append(options.priority)
        columns["run_at"].append(options.run_at)
        columns["max_attempts"].append(options.max_attempts)
        columns["concurrency_key"].append(options.concurrency_key)
        columns["batch_id"].append(batch_id)
        columns["tenant"].append(options.tenant)
    return columns
