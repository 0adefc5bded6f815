"""Batches: a set of jobs with callbacks when the last one finishes.

A member is live while its job is ``ready`` (``ferryman_batch_live``): its end for good is its
job's own status change, so a member costs no write a plain job does not. After that change
commits the finisher asks ``ferryman_finish_batch``: no live member plus a compare-and-set on
``finished_at`` means exactly one caller enqueues the callbacks, in its own transaction. No
counter row is touched per member; totals are a snapshot written once by that single finisher
(the total from one ``ferryman_batch_enqueues`` row per enqueue statement). What after-commit
work can lose, the reaper's stalled-batch sweep repairs.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from psycopg.types.json import Jsonb

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.errors import QueueError
from ferryman_worker.queue.producer import borrowed, current_batch
from ferryman_worker.queue.registry import Job, JobCall

Callback = Job[Any, Any] | JobCall | None


@dataclasses.dataclass(frozen=True)
class Batch:
    """A batch being filled; ``id`` is its row's id."""

    id: int


@contextlib.contextmanager
def batch(
    *,
    on_finish: Callback = None,
    on_success: Callback = None,
    on_failure: Callback = None,
    conn: Connection | None = None,
    **metadata: Any,
) -> Iterator[Batch]:
    """Jobs enqueued inside the block (one by one or in bulk) join the batch.

    When every member has finished: ``on_finish`` runs, and ``on_success`` if none failed for
    good, else ``on_failure``. A callback receives its own arguments plus ``batch=``, a dict with
    ``id``, ``metadata``, ``total``, ``completed`` and ``failed``. With ``conn`` in a
    transaction, the batch and its members exist only if that transaction commits.
    """
    with borrowed(conn) as lent:
        row = lent.execute(
            queries.get("create_batch"),
            {
                "metadata": Jsonb(metadata),
                "on_finish": _callback(on_finish),
                "on_success": _callback(on_success),
                "on_failure": _callback(on_failure),
            },
        ).fetchone()
        assert row is not None
        created = Batch(int(row["id"]))
        token = current_batch.set(created.id)
        try:
            yield created
        except BaseException:
            current_batch.reset(token)
            if lent.info.transaction_status.name == "IDLE":
                seal(lent, created.id)  # members enqueued so far exist: let them finish it
            raise
        current_batch.reset(token)
        seal(lent, created.id)


def seal(conn: Connection, batch_id: int) -> None:
    """Mark the batch complete in membership, then finish it if its members already are."""
    conn.execute(queries.get("seal_batch"), {"batch_id": batch_id})
    try_finish(conn, batch_id)


def try_finish(conn: Connection, batch_id: int) -> bool:
    """Finish the batch if no member is left; True for the single caller that did."""
    row = conn.execute(queries.get("finish_batch"), {"batch_id": batch_id}).fetchone()
    return bool(row and row["finished"])


def _callback(target: Callback) -> Jsonb | None:
    if target is None:
        return None
    if isinstance(target, Job):
        target = target.call()
    if not isinstance(target, JobCall):
        raise QueueError(f"a batch callback must be a job or job.call(...), not {target!r}")
    options = target.options
    return Jsonb(
        {
            "name": target.name,
            "args": list(target.args),
            "kwargs": target.kwargs,
            "queue": options.queue,
            "priority": options.priority,
            "max_attempts": options.max_attempts,
        }
    )
