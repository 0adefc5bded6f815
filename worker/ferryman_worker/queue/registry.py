"""Job functions and recurring entries, registered by decorators at import time.

A job is a plain function registered under a name with its defaults (queue, priority,
attempts). Workers find them by importing the modules named by ``--import``.
"""

from __future__ import annotations

import dataclasses
import datetime
import inspect
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

from ferryman_worker.errors import QueueError, UnknownJobError

P = ParamSpec("P")
R = TypeVar("R")


@dataclasses.dataclass(frozen=True)
class JobOptions:
    """Where and how a job runs; set at registration, overridable per enqueue."""

    queue: str = "default"
    priority: int = 0
    max_attempts: int = 5
    concurrency_key: str | None = None
    run_at: datetime.datetime | None = None
    tenant: str = ""
    """Whose job it is: when several tenants have due jobs in a queue, a claim serves the one
    with the fewest running jobs there first, then in order within it ('': no one's)."""


@dataclasses.dataclass(frozen=True)
class JobCall:
    """A job with its arguments and options, ready to enqueue (or to use as a batch callback)."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    options: JobOptions

    def with_options(self, **changes: Any) -> JobCall:
        """The same call with some options replaced (queue, priority, run_at, ...)."""
        return dataclasses.replace(self, options=dataclasses.replace(self.options, **changes))


class Job(Generic[P, R]):
    """A registered job function. Calling it runs the function here; ``call`` makes a JobCall."""

    def __init__(
        self,
        func: Callable[P, R],
        name: str,
        options: JobOptions,
        *,
        pass_context: bool,
        pressure: bool,
    ) -> None:
        self.func = func
        self.name = name
        self.options = options
        self.pass_context = pass_context
        self.pressure = pressure

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def call(self, *args: Any, **kwargs: Any) -> JobCall:
        """This job with these arguments (JSON-able) and its registered options."""
        return JobCall(self.name, args, kwargs, self.options)

    def __repr__(self) -> str:
        return f"<Job {self.name} queue={self.options.queue}>"


@dataclasses.dataclass(frozen=True)
class CronEntry:
    """A recurring job: ``schedule`` is a five-field cron expression (UTC)."""

    schedule: str
    job: Job[Any, Any]


class Registry:
    """Job names to jobs, and the recurring entries."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job[Any, Any]] = {}
        self.cron: list[CronEntry] = []

    def add(self, new: Job[Any, Any]) -> None:
        if inspect.iscoroutinefunction(new.func) or inspect.isasyncgenfunction(new.func):
            raise QueueError(
                f"job {new.name!r} ({_where(new.func)}) is an async def function: lane threads "
                "call jobs and would never await it, so it would be marked succeeded without "
                "running. Make it a plain def (inside, run a coroutine with asyncio.run(...))"
            )
        existing = self.jobs.get(new.name)
        if existing is not None and existing.func is not new.func:
            raise QueueError(
                f"two functions are registered as job {new.name!r} ({_where(existing.func)} and "
                f"{_where(new.func)}): give one of them another name with @job(name=...)"
            )
        self.jobs[new.name] = new

    def get(self, name: str) -> Job[Any, Any]:
        try:
            return self.jobs[name]
        except KeyError:
            raise UnknownJobError(
                f"no job named {name!r} is registered in this worker: pass the module that "
                "defines it with --import (or FERRYMAN_IMPORTS)"
            ) from None

    def add_cron(self, schedule: str, target: Job[Any, Any]) -> None:
        from cronsim import CronSim, CronSimError

        try:
            CronSim(schedule, datetime.datetime.now(datetime.UTC))
        except CronSimError as exc:
            raise QueueError(
                f"recurring job {target.name!r}: {schedule!r} is not a cron expression ({exc}); "
                "use five fields, e.g. '*/5 * * * *'"
            ) from None
        self.add(target)
        self.cron.append(CronEntry(schedule, target))


default_registry = Registry()


def job(
    name: str | None = None,
    *,
    queue: str = "default",
    priority: int = 0,
    max_attempts: int = 5,
    concurrency_key: str | None = None,
    pass_context: bool = False,
    pressure: bool = False,
    registry: Registry | None = None,
) -> Callable[[Callable[P, R]], Job[P, R]]:
    """Register a function as a job.

    ``pass_context``: the function gets a ``JobContext`` first (its claim's connection, the
    job's record). ``pressure``: defer the job instead of running it while the database is busy.
    ``concurrency_key``: at most one job with this key runs at a time.
    """
    if max_attempts < 1:
        raise QueueError(f"max_attempts is {max_attempts}; a job needs at least 1 attempt")

    def register(func: Callable[P, R]) -> Job[P, R]:
        options = JobOptions(queue, priority, max_attempts, concurrency_key)
        registered = Job(
            func,
            name or f"{func.__module__}.{func.__qualname__}",
            options,
            pass_context=pass_context,
            pressure=pressure,
        )
        (registry or default_registry).add(registered)
        return registered

    return register


def cron(schedule: str, *, registry: Registry | None = None) -> Callable[[Job[P, R]], Job[P, R]]:
    """Run a registered job on a cron schedule (UTC), once per tick across all workers.

    Stack it on ``@job``: ``@cron("*/5 * * * *")`` above ``@job("reap", queue="default")``.
    """

    def register(target: Job[P, R]) -> Job[P, R]:
        (registry or default_registry).add_cron(schedule, target)
        return target

    return register


def _where(func: Callable[..., Any]) -> str:
    return f"{func.__module__}.{func.__qualname__}"
