"""``ferryman reap``: the repair sweeps, run every five minutes by a CronJob.

Each sweep repeats what a finishing job or task would have done; it decides nothing the rows
don't already say, and is safe to run concurrently with workers and with another reaper.
"""

from __future__ import annotations

from ferryman_worker.db.connect import Connection
from ferryman_worker.queue import admin
from ferryman_worker.settings import Settings


def reap(conn: Connection, settings: Settings) -> list[str]:
    """Run every sweep once; returns one line per sweep saying what it did."""
    batches = admin.sweep_stalled_batches(conn, settings.stalled_batch_after)
    pruned = admin.prune(conn, settings.retention_hours * 3600)
    return [
        f"stalled batches: {batches.stale_members} stale member(s) removed, "
        f"{batches.sealed} sealed, {batches.finished} finished",
        f"prune: {pruned['jobs']} job(s), {pruned['batches']} batch(es), "
        f"{pruned['workers']} worker row(s) older than {settings.retention_hours:g}h deleted",
    ]
