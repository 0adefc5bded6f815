"""Scheduling: which job walks a task, and the top-up that keeps a run's share of the lane full.

It sits below everything that queues tasks (the barrier's winner, a finishing task, runs, the
reaper) and below the task job itself (``tasks``), which registers its job under the name and
options given here: so nothing that queues a task imports the code that walks one. A process
that runs task jobs imports ``tasks`` to register the job (``ferryman worker``, ``ferryman run``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.queue import JobCall, JobOptions, enqueue_many

TASK_JOB = "ferryman.task"
"""The queue job that claims and walks one task; its arguments are (task id, run id)."""
LANE = "migrations"
"""The queue (lane) task jobs run in; its width sets a run's default in-flight limit."""
TASK_OPTIONS = JobOptions(queue=LANE, max_attempts=25)
"""The task job's options, as ``tasks.run_task`` registers them."""


def task_call(task_id: int, run_id: int, tenant: str = "") -> JobCall:
    """The task job for ``task_id`` of a run of ``tenant``, ready to enqueue."""
    return JobCall(TASK_JOB, (task_id, run_id), {}, TASK_OPTIONS).with_options(tenant=tenant)


def tenant_of(run: dict[str, Any]) -> str:
    """Whose share of the lane a run's tasks take: its namespace (its name is
    ``namespace/name``), so that one namespace's many runs share the lane with another's one;
    '' for a name without a namespace."""
    namespace, slash, _ = str(run["name"]).partition("/")
    return namespace if slash else ""


def enqueue_tasks(conn: Connection, run: dict[str, Any], task_ids: Sequence[int]) -> None:
    """One job per task, in the caller's transaction."""
    tenant = tenant_of(run)
    enqueue_many([task_call(task_id, run["id"], tenant) for task_id in task_ids], conn=conn)


def top_up(conn: Connection, run: dict[str, Any]) -> list[int]:
    """Queue the run's oldest pending tasks of its open phase up to its in-flight limit, and
    enqueue a job for each, in the caller's transaction. Returns the task ids queued."""
    rows = conn.execute(
        queries.engine("top_up"),
        {"run_id": run["id"], "max_in_flight": run["options"]["max_in_flight"]},
    ).fetchall()
    ids = sorted(int(row["id"]) for row in rows)
    enqueue_tasks(conn, run, ids)
    return ids
