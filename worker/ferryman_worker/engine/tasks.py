"""Tasks: the unit of scheduling and retry. One queue job per task, ``(task_id, run_id)``.

A task job claims its task with a fenced update or exits; then it walks its cursor:

- a **page** task fetches one listing page (with no transaction open), writes it in windows,
  each window in one transaction with the task's checkpoint, and its last window also finishes
  the task, creates the next task of its stripe (a full page: start + stripes x page size),
  tries the phase barrier, tops the run up and completes the job, all in one commit;
- a **tree** task (e-mail) works through its parents (ten deals): per deal one listing, then
  rounds of bodies on ``fetch_threads`` fetch threads (each round's tokens are reserved on the
  job thread first; fetch threads hold no connection), then windows of messages on the job
  thread, with a checkpoint after each deal. Messages the ledger holds are not fetched again.

Every write happens on the job thread, in windows, in order. Cancel and suspend are seen at the
next window boundary.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.engine import phases, windows
from ferryman_worker.engine.ratelimit import Budget
from ferryman_worker.engine.runtime import RESOURCE, EngineRuntime
from ferryman_worker.engine.source import RateLimited, Retry, SourceClient, SourceError
from ferryman_worker.providers import Kind, Provider, Request
from ferryman_worker.providers import load as load_provider
from ferryman_worker.queue import JobContext, enqueue_many, job

TASK_JOB = "ferryman.task"
LANE = "migrations"
ROUND_PER_THREAD = 8
"""Bodies per fetch thread in one round: the round's tokens are reserved on the job thread
first, then the fetch threads drain it with no barrier between bodies."""


def _q(name: str) -> str:
    return queries.get(name, "engine.sql")


class Stop(Exception):
    """The task must stop at this window boundary. ``status``: what the task becomes
    ('pending' to resume later, 'cancelled'), or None when its claim was taken from it."""

    def __init__(self, status: str | None) -> None:
        super().__init__(status or "claim lost")
        self.status = status


@job(TASK_JOB, queue=LANE, pass_context=True, pressure=True, max_attempts=25)
def run_task(ctx: JobContext, task_id: int, run_id: int) -> None:
    """Claim task ``task_id`` or exit; walk it; finish it with the job, in one commit."""
    task = ctx.conn.execute(_q("claim_task"), {"task_id": task_id, "job_id": ctx.job.id}).fetchone()
    if task is None:
        return  # another job has it, it is finished, or its phase is not open: nothing to do
    run = ctx.conn.execute(_q("run_by_id"), {"run_id": run_id}).fetchone()
    assert run is not None
    runtime = ctx.resources.get(RESOURCE) or EngineRuntime()
    scope = Scope.build(ctx, run, task, runtime)
    if not runtime.sync_windows:
        ctx.conn.execute("SET synchronous_commit = off")
    try:
        scope.walk()
    except Stop as stop:
        if stop.status is not None:
            with ctx.completing() as conn:
                conn.execute(
                    _q("stop_task"),
                    {"task_id": task_id, "job_id": ctx.job.id, "status": stop.status},
                )
    except Exception as exc:
        if ctx.job.is_last_attempt:
            _fail(ctx.conn, task_id, run_id, ctx.job.id, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        if not runtime.sync_windows and not ctx.conn.broken:
            ctx.conn.execute("RESET synchronous_commit")


def enqueue_tasks(conn: Connection, run_id: int, task_ids: Sequence[int]) -> None:
    """One job per task, in the caller's transaction."""
    enqueue_many([run_task.call(task_id, run_id) for task_id in task_ids], conn=conn)


def _fail(conn: Connection, task_id: int, run_id: int, job_id: int, error: str) -> None:
    with conn.transaction():
        conn.execute(_q("fail_task"), {"task_id": task_id, "job_id": job_id, "error": error})
        conn.execute(
            _q("finish_run"),
            {
                "run_id": run_id,
                "state": "failed",
                "error": f"task {task_id} failed: {error}"[:2000],
            },
        )


@dataclasses.dataclass
class Scope:
    """One claimed task and everything its walk needs."""

    ctx: JobContext
    run: dict[str, Any]
    task: dict[str, Any]
    provider: Provider
    kind: Kind
    client: SourceClient
    budget: Budget
    retry: Retry = dataclasses.field(default_factory=Retry)

    @classmethod
    def build(
        cls, ctx: JobContext, run: dict[str, Any], task: dict[str, Any], runtime: EngineRuntime
    ) -> Scope:
        provider = load_provider(run["provider"])
        token = runtime.token(run["credential"])
        return cls(
            ctx,
            run,
            task,
            provider,
            provider.kinds[task["kind"]],
            runtime.client(run["base_url"], token),
            runtime.budget(run["base_url"], token, run["options"].get("rate_limit")),
        )

    @property
    def conn(self) -> Connection:
        return self.ctx.conn

    @property
    def options(self) -> dict[str, Any]:
        options: dict[str, Any] = self.run["options"]
        return options

    @property
    def target(self) -> windows.Target:
        return windows.Target(
            self.run["id"], self.task["id"], self.run["workspace"], self.provider, self.kind
        )

    def walk(self) -> None:
        if self.kind.walk == "pages":
            walk_pages(self)
        else:
            walk_tree(self)

    # -- the source ---------------------------------------------------------------------------

    def fetch(self, request: Request) -> Any:
        """One call on the job thread: tokens first, then the call; 429 pauses the budget for
        every worker; 5xx and timeouts are retried with backoff."""
        for attempt in range(self.retry.attempts):
            self.budget.reserve(self.conn, request.cost)
            try:
                return self.client.get(request)
            except RateLimited as exc:
                self.budget.pause(self.conn, exc.retry_after)
            except SourceError as exc:
                if not exc.retryable or attempt + 1 == self.retry.attempts:
                    raise
                self.gate(self.conn)  # suspended or cancelled meanwhile: stop retrying
                self.retry.sleep(attempt)
        raise SourceError(
            f"GET {request.path}: still rate-limited after {self.retry.attempts} tries",
            retryable=True,
        )

    # -- writing ------------------------------------------------------------------------------

    def commit_window(
        self,
        records: list[dict[str, Any]],
        offset: int,
        extra_malformed: Sequence[tuple[str | None, str]] = (),
        *,
        finish: bool = False,
        next_stripe: int | None = None,
    ) -> None:
        """One window in one transaction: rows, row errors and the checkpoint at ``offset``;
        with ``finish``, also the task's end and the job's completion. A row the database
        refuses sends the window round again, row by row."""
        valid, malformed = windows.validate(self.kind, records)
        malformed = [*extra_malformed, *malformed]
        for careful in (False, True):
            try:
                with contextlib.ExitStack() as stack:
                    if not careful and not malformed:  # BEGIN, rows, checkpoint: one round trip
                        stack.enter_context(self.conn.pipeline())
                    stack.enter_context(
                        self.ctx.completing() if finish else self.conn.transaction()
                    )
                    counts = windows.write(
                        self.conn, self.target, valid, malformed, careful=careful
                    )
                    self.checkpoint(self.conn, offset, counts)
                    if finish:
                        self.finish(self.conn, next_stripe)
                return
            except windows.REFUSED:
                if careful:
                    raise

    def checkpoint(self, conn: Connection, offset: int, counts: windows.Counts) -> None:
        """Record how far the task got; Stop if the run or the task is no longer ours to run."""
        done = conn.execute(
            _q("checkpoint"),
            {
                "task_id": self.task["id"],
                "job_id": self.ctx.job.id,
                "run_id": self.run["id"],
                "offset": offset,
                "written": counts.written,
                "skipped": counts.skipped,
                "failed": counts.failed,
            },
        ).fetchone()
        if done is None:
            self.gate(conn)
            raise Stop(None)

    def gate(self, conn: Connection) -> None:
        """Cancel and suspend take effect here, at a window boundary."""
        row = conn.execute(_q("run_gate"), {"run_id": self.run["id"]}).fetchone()
        if row is None or row["state"] != "running":
            raise Stop("cancelled")
        if row["suspended"]:
            raise Stop("pending")

    def finish(self, conn: Connection, next_stripe: int | None) -> None:
        """The task's last step, in its last window's transaction: done, next stripe task,
        the barrier, the run's top-up."""
        run = conn.execute(_q("lock_run"), {"run_id": self.run["id"]}).fetchone()
        assert run is not None
        if run["state"] != "running" or run["suspended"]:
            raise Stop("cancelled" if run["state"] != "running" else "pending")
        if (
            conn.execute(
                _q("finish_task"), {"task_id": self.task["id"], "job_id": self.ctx.job.id}
            ).fetchone()
            is None
        ):
            raise Stop(None)
        if next_stripe is not None:
            key, cursor = phases.stripe_cursor(self.kind.name, next_stripe)
            phases.seed_tasks(conn, run["id"], self.task["phase"], [(self.kind.name, key, cursor)])
        phases.close_if_done(conn, run, self.provider)
        phases.top_up(conn, run)
        conn.execute(_q("beat_run"), {"run_id": run["id"]})


def chunks(items: Sequence[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def walk_pages(scope: Scope) -> None:
    """One listing page: fetch, write in windows, finish."""
    options = scope.options
    start, size = int(scope.task["cursor"]["start"]), int(options["page_size"])
    page = scope.provider.parse_page(
        scope.fetch(scope.provider.listing(scope.kind.name, start, size))
    )
    next_stripe = start + options["stripes"] * size if len(page.records) >= size else None
    offset = int(scope.task["processed_offset"])
    parts = list(chunks(page.records[offset:], int(options["window_size"]))) or [[]]
    for window in parts[:-1]:
        offset += len(window)
        scope.commit_window(window, offset)
    scope.commit_window(parts[-1], offset + len(parts[-1]), finish=True, next_stripe=next_stripe)


def walk_tree(scope: Scope) -> None:
    """Parents from the task's offset on; a checkpoint after each; the last finishes the task."""
    parents: list[int] = list(scope.task["cursor"]["parents"])
    first = int(scope.task["processed_offset"])
    threads = int(scope.options["fetch_threads"])
    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="fetch") as pool:
        for index in range(first, len(parents)):
            records, malformed = _children_with_bodies(scope, pool, parents[index])
            _write_parent(scope, records, malformed, index, last=index == len(parents) - 1)
    if first >= len(parents):
        scope.commit_window([], first, finish=True)


def _write_parent(
    scope: Scope,
    records: list[dict[str, Any]],
    malformed: list[tuple[str | None, str]],
    index: int,
    *,
    last: bool,
) -> None:
    parts = list(chunks(records, int(scope.options["window_size"]))) or [[]]
    for number, window in enumerate(parts):
        final = number == len(parts) - 1
        offset = index + 1 if final else index
        bad = malformed if number == 0 else []
        scope.commit_window(window, offset, bad, finish=final and last)


def _children_with_bodies(
    scope: Scope, pool: concurrent.futures.ThreadPoolExecutor, parent: int
) -> tuple[list[dict[str, Any]], list[tuple[str | None, str]]]:
    """A parent's children not yet written, with their bodies, and the malformed headers."""
    headers = _list_children(scope, parent)
    valid, malformed = windows.validate(scope.kind, headers)
    valid_ids = {str(getattr(model, "id", None)) for model in valid}
    written = {
        row["source_id"]
        for row in scope.conn.execute(
            _q("ledger_written"),
            {
                "workspace": scope.run["workspace"],
                "kind": scope.kind.name,
                "source_ids": sorted(valid_ids),
            },
        )
    }
    todo = [h for h in headers if str(h.get("id")) in valid_ids - written]
    return fetch_bodies(scope, pool, todo), malformed


def _list_children(scope: Scope, parent: int) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    size = int(scope.options["page_size"])
    while True:
        request = scope.provider.children(scope.kind.name, parent, len(records), size)
        page = scope.provider.parse_page(scope.fetch(request))
        records.extend(page.records)
        if not page.more or not page.records:
            return records


def fetch_bodies(
    scope: Scope, pool: concurrent.futures.ThreadPoolExecutor, headers: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Rounds of up to ``fetch_threads`` x ROUND_PER_THREAD body calls: reserve the round's
    tokens on the job thread, run the calls on the fetch threads, join them all; retry what
    failed retryably."""
    threads = int(scope.options["fetch_threads"])
    bodies: dict[int, dict[str, Any]] = {}
    pending = list(enumerate(headers))
    failures = 0
    while pending:
        batch, pending = (
            pending[: threads * ROUND_PER_THREAD],
            pending[threads * ROUND_PER_THREAD :],
        )
        requests = [scope.provider.body(scope.kind.name, header) for _, header in batch]
        scope.budget.reserve(scope.conn, sum(r.cost for r in requests))
        retry: list[tuple[int, dict[str, Any]]] = []
        for (position, header), result in zip(
            batch, pool.map(_call(scope.client), requests), strict=True
        ):
            if isinstance(result, RateLimited):
                scope.budget.pause(scope.conn, result.retry_after)
                retry.append((position, header))
            elif isinstance(result, SourceError):
                if not result.retryable:
                    raise result
                retry.append((position, header))
            else:
                bodies[position] = scope.provider.merge_body(header, result)
        if retry:
            failures += 1
            if failures > scope.retry.attempts * 4:
                raise SourceError("message bodies kept failing", retryable=True)
            scope.gate(scope.conn)  # suspended or cancelled meanwhile: stop retrying
            scope.retry.sleep(min(failures, 5))
            pending = retry + pending
    return [bodies[position] for position in sorted(bodies)]


def _call(client: SourceClient) -> Any:
    def call(request: Request) -> Any:
        try:
            return client.get(request)
        except SourceError as exc:
            return exc

    return call
