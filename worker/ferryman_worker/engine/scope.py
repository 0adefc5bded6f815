"""A claimed task and what its walk does with it: call the source (tokens first, retries,
429 pauses), commit windows (rows, row errors and the checkpoint in one transaction), stop at a
window boundary when the run is suspended or cancelled, and finish (next stripe, barrier,
top-up and the job's completion in the last window's transaction)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.engine import phases, windows
from ferryman_worker.engine.ratelimit import Budget
from ferryman_worker.engine.runtime import EngineRuntime
from ferryman_worker.engine.source import RateLimited, Retry, SourceClient, SourceError
from ferryman_worker.providers import Kind, Provider, Request
from ferryman_worker.providers import load as load_provider
from ferryman_worker.queue import JobContext


def _q(name: str) -> str:
    return queries.get(name, "engine.sql")


class Stop(Exception):
    """The task must stop at this window boundary. ``status``: what the task becomes
    ('pending' to resume later, 'cancelled'), or None when its claim was taken from it."""

    def __init__(self, status: str | None) -> None:
        super().__init__(status or "claim lost")
        self.status = status


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
