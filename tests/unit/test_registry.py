"""Registering jobs and recurring entries."""

from __future__ import annotations

import pytest

from ferryman_worker.errors import QueueError, UnknownJobError
from ferryman_worker.queue import JobCall, JobOptions, Registry, cron, job


def test_a_job_keeps_its_options_and_still_runs_as_a_function() -> None:
    registry = Registry()

    @job("t.add", queue="critical", priority=5, max_attempts=2, registry=registry)
    def add(a: int, b: int) -> int:
        return a + b

    assert add(2, 3) == 5
    assert registry.get("t.add") is add
    assert add.call(1, b=2) == JobCall("t.add", (1,), {"b": 2}, JobOptions("critical", 5, 2))
    assert add.call(1, b=2).with_options(queue="x").options.queue == "x"


def test_two_functions_under_one_name_are_refused() -> None:
    registry = Registry()
    job("t.same", registry=registry)(lambda: None)
    with pytest.raises(QueueError, match="give one of them another name"):
        job("t.same", registry=registry)(lambda: None)


def test_an_unknown_name_says_to_import_its_module() -> None:
    with pytest.raises(UnknownJobError, match="--import"):
        Registry().get("nope")


def test_a_bad_cron_expression_is_refused() -> None:
    registry = Registry()
    target = job("t.cron", registry=registry)(lambda: None)
    with pytest.raises(QueueError, match="not a cron expression"):
        cron("every five minutes", registry=registry)(target)


def test_zero_attempts_is_refused() -> None:
    with pytest.raises(QueueError, match="at least 1 attempt"):
        job("t.zero", max_attempts=0)


def test_the_task_job_is_registered_with_the_name_and_options_schedule_enqueues_it_with() -> None:
    from ferryman_worker.engine import schedule, tasks

    call = schedule.task_call(7, 3)
    assert (call.name, call.args, call.options) == (
        tasks.run_task.name,
        (7, 3),
        tasks.run_task.options,
    )


def test_an_async_job_is_refused_at_registration() -> None:
    registry = Registry()

    async def fetch_report(report_id: int) -> None:
        """Never awaited by a lane thread: it would be marked succeeded without running."""

    with pytest.raises(QueueError, match=r"'t.async' .*is an async def function.*plain def"):
        job("t.async", registry=registry)(fetch_report)
    assert "t.async" not in registry.jobs
