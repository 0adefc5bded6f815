"""The capsule's public API: register jobs, enqueue them, group them in batches.

from ferryman_worker.queue import job, enqueue, enqueue_many, batch

@job("reports.build", queue="default", max_attempts=3)
def build_report(report_id: int) -> None: ...

enqueue(build_report, 42)                          # autocommit, default database
with conn.transaction():
    enqueue(build_report, 43, conn=conn)           # exists only if this commits
with batch(on_finish=notify_done.call(user=7)):
    enqueue_many(build_report.call(i) for i in range(1000))

A job that raises is tried again later (exponential backoff) until its ``max_attempts`` are
used; one that raises ``Unretryable`` fails for good at once. Jobs are plain functions, called on
lane threads: an ``async def`` function is refused at registration.

Delivery is at least once: a job's completion commits after its function returns, so a job whose
process or database dies between its work and that commit runs again. For exactly once, register
it with ``pass_context=True`` and write inside ``with ctx.completing() as conn:`` — the writes and
the completion commit in one transaction.
"""

from ferryman_worker.errors import Unretryable
from ferryman_worker.queue.batches import Batch, batch
from ferryman_worker.queue.producer import configure, enqueue, enqueue_many
from ferryman_worker.queue.registry import Job, JobCall, JobOptions, Registry, cron, job
from ferryman_worker.queue.runner import JobContext

__all__ = [
    "Batch",
    "Job",
    "JobCall",
    "JobContext",
    "JobOptions",
    "Registry",
    "Unretryable",
    "batch",
    "configure",
    "cron",
    "enqueue",
    "enqueue_many",
    "job",
]
