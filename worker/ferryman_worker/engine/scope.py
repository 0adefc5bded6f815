"""A claimed task and what its walk does with it: call the source (tokens first, retries,
429 pauses), commit windows (rows, row errors and the checkpoint in one transaction), stop at a
window boundary when the run is suspended or cancelled, and finish (next page, barrier,
top-up and the job's completion in the last window's transaction)."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from psycopg.rows import tuple_row

from ferryman_worker import destinations, metrics, providers
from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.destination_policy import Policy
from ferryman_worker.engine import calls, delta, paging, phases, schedule, windows
from ferryman_worker.engine.ratelimit import Budget
from ferryman_worker.engine.runtime import EngineRuntime
from ferryman_worker.engine.source import Retry, SourceClient
from ferryman_worker.providers import Kind, Provider, Reply, Request
from ferryman_worker.queue import JobContext


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
    destinations: Policy = dataclasses.field(default_factory=Policy)
    """Where the installation lets mappings write (``EngineRuntime.destinations``)."""
    skips_known: bool = False
    """A window of this task met a record the ledger holds (a re-run, a retried or resumed
    task): its next windows leave out such records before writing (``windows.without_known``)."""
    sync_windows: bool = False
    """Whether each window waits for its commit to reach disk (``EngineRuntime.sync_windows``);
    by default it commits asynchronously (``windows.Target.commit``)."""
    max_pages: int = paging.DEFAULT_MAX_PAGES
    """Pages a listing chain may have when its kind declares no ``maxPages``
    (``EngineRuntime.max_pages``)."""

    @classmethod
    def build(
        cls, ctx: JobContext, run: dict[str, Any], task: dict[str, Any], runtime: EngineRuntime
    ) -> Scope:
        provider = providers.of_run(run)
        credential = runtime.credential(run, provider.auth)
        return cls(
            ctx,
            run,
            task,
            provider,
            provider.kinds[task["kind"]],
            runtime.client(run["base_url"], credential, provider.auth),
            runtime.budget(run["base_url"], credential, run["options"].get("rate_limit")),
            destinations=runtime.destinations,
            sync_windows=runtime.sync_windows,
            max_pages=runtime.max_pages,
        )

    @property
    def conn(self) -> Connection:
        return self.ctx.conn

    @property
    def options(self) -> dict[str, Any]:
        options: dict[str, Any] = self.run["options"]
        return options

    @property
    def source_options(self) -> dict[str, Any]:
        """The run's ``spec.source.options``, typed and with the provider's defaults."""
        found: dict[str, Any] = self.options.get("source") or {}
        return found

    @functools.cached_property
    def listing_extras(self) -> tuple[dict[str, Any], dict[str, str]]:
        """What every listing of the task adds to its kind's request: the run's source
        options, and a delta run's changed-since filter."""
        return self.source_options, delta.listing_params(self.run, self.kind)

    @functools.cached_property
    def cursor(self) -> windows.Cursor:
        """The task's window cursor, on the job's connection."""
        return self.conn.cursor(row_factory=tuple_row)

    @functools.cached_property
    def target(self) -> windows.Target:
        return windows.Target(
            self.run["id"],
            self.task["id"],
            self.ctx.job.id,
            self.run["workspace"],
            self.kind,
            destinations.writer_for(self.run, self.provider, self.kind.name, self.destinations),
            None if self.sync_windows else "off",
        )

    # -- the source ---------------------------------------------------------------------------

    def fetch(self, request: Request) -> Reply:
        """One call, on the job thread (see ``call_all``)."""
        reply: Reply = self.call_all([request])[0]
        return reply

    def call_all(
        self, requests: Sequence[Request], map_: calls.Mapper = map, *, gone_ok: bool = False
    ) -> list[Any]:
        """The requests' answers, in order, in rounds (``calls.Calls.all``): a failed round
        goes again only while the run is neither suspended nor cancelled (``gate``)."""
        caller = calls.Calls(
            self.conn, self.client, self.budget, self.kind.policy, self.retry, self.gate
        )
        return caller.all(requests, map_, gone_ok=gone_ok)

    # -- writing ------------------------------------------------------------------------------

    def commit_window(
        self,
        records: list[dict[str, Any]],
        offset: int,
        extra_malformed: Sequence[tuple[str | None, str]] = (),
        *,
        finish: bool = False,
        following: paging.Position | None = None,
        listed: paging.Listed | None = None,
        skipped: int = 0,
    ) -> None:
        """One window, committed with the checkpoint at ``offset`` (and ``skipped``: records
        left out as the ledger holds them already): one statement, or with
        ``finish`` one transaction that also ends the task (with what its page ``listed``)
        and completes the job. A row the
        database refuses sends the window round again, row by row. A window the gate refused
        while the run was suspended is written again when the run was resumed before the job
        looked at it (the task still its own); otherwise the job stops (``Stop``)."""
        deleted, records = delta.tombstones(self.run, self.kind, records)
        valid, malformed = windows.validate(self.kind, records)
        window = windows.Window(offset, valid, [*extra_malformed, *malformed], deleted, skipped)
        began = time.perf_counter()
        try:
            counts = self._write(window, following, listed, finish=finish)
        except windows.Closed:
            self.gate(self.conn)
            if not self.holds_task(self.conn):
                raise Stop(None) from None
            # refused while suspended, resumed before the look: the same window again
            self.commit_window(
                records,
                offset,
                extra_malformed,
                finish=finish,
                following=following,
                listed=listed,
                skipped=skipped,
            )
            return
        metrics.window(
            (self.run["id"], self.run["name"]),
            self.kind.name,
            counts,
            time.perf_counter() - began,
        )

    def to_write(self, records: Sequence[Any]) -> list[bool] | None:
        """Per record of a page, whether it is still to write (False: the ledger holds it), looked
        up where such records may be: a full run of a kind that an earlier run of the workspace
        covered (a re-run, a run after a failed one). None: write them all, nothing looked up. A
        first import asks nothing: a record the ledger holds there anyway (the source shifted, a
        chain begun again) is refused by the ledger's key and left out window by window
        (``_write``). A delta's statement sorts its known records itself."""
        if delta.is_delta(self.run) or self.kind.name not in (self.run.get("earlier_kinds") or ()):
            return None
        return windows.to_write(self.cursor, self.target, records)

    def _write(
        self,
        window: windows.Window,
        following: paging.Position | None,
        listed: paging.Listed | None,
        *,
        finish: bool,
    ) -> windows.Counts:
        """The window as one statement (in the task's closing transaction with ``finish``). A
        window the ledger refused for a record it holds is written again without such records,
        as are the task's next windows (a full run's only: a delta's statement skips them
        itself); one the database refuses otherwise goes round again, row by row."""
        if self.skips_known:
            window = windows.without_known(self.cursor, self.target, window)
        try:
            if finish:
                return self._transaction(windows.write, window, following, listed)
            return windows.write(self.cursor, self.target, window)  # committed on its own
        except windows.REFUSED as exc:
            if self.skips_known or delta.is_delta(self.run) or not windows.holds_known(exc):
                return self._transaction(
                    windows.write_carefully, window, following, listed, finish=finish
                )
        self.skips_known = True
        return self._write(window, following, listed, finish=finish)

    def _transaction(
        self,
        write: Callable[[windows.Cursor, windows.Target, windows.Window], windows.Counts],
        window: windows.Window,
        following: paging.Position | None,
        listed: paging.Listed | None,
        *,
        finish: bool = True,
    ) -> windows.Counts:
        with self.ctx.completing() if finish else self.conn.transaction():
            counts = write(self.cursor, self.target, window)
            if finish:
                self.finish(self.conn, following, listed)
        return counts

    def gate(self, conn: Connection) -> None:
        """Cancel and suspend take effect here, at a window boundary."""
        row = conn.execute(queries.engine("run_gate"), {"run_id": self.run["id"]}).fetchone()
        if row is None or row["state"] != "running":
            raise Stop("cancelled")
        if row["suspended"]:
            raise Stop("pending")

    def holds_task(self, conn: Connection) -> bool:
        """Whether the task is still this job's (a refused window means a lost claim only when
        it is not)."""
        params = {"task_id": self.task["id"], "job_id": self.ctx.job.id}
        return conn.execute(queries.engine("task_held"), params).fetchone() is not None

    def finish(
        self,
        conn: Connection,
        following: paging.Position | None,
        listed: paging.Listed | None = None,
    ) -> None:
        """The task's last step, in its last window's transaction: done (with what its page
        ``listed``, for the kind's reconciliation), next page's task, the barrier, the run's
        top-up."""
        run = conn.execute(queries.engine("lock_run"), {"run_id": self.run["id"]}).fetchone()
        assert run is not None
        if run["state"] != "running" or run["suspended"]:
            raise Stop("cancelled" if run["state"] != "running" else "pending")
        if (
            conn.execute(
                queries.engine("finish_task"),
                {
                    "task_id": self.task["id"],
                    "job_id": self.ctx.job.id,
                    "listed": None if listed is None else listed.records,
                    "stated_total": None if listed is None else listed.total,
                    "ended_by": None if listed is None else listed.ended_by,
                },
            ).fetchone()
            is None
        ):
            raise Stop(None)
        if following is not None:
            task = (self.kind.name, following.key(self.kind), following.cursor())
            phases.seed_tasks(conn, run["id"], self.task["phase"], [task])
        phases.close_if_done(conn, run, self.provider)
        schedule.top_up(conn, run)
        conn.execute(queries.engine("beat_run"), {"run_id": run["id"]})
