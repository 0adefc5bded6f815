"""The two walks a task can do.

- A **page** walk fetches one listing page (with no transaction open) and writes it in windows;
  its last window finishes the task and, for a full page, creates the next task of its stripe
  (start + stripes x page size).
- A **tree** walk (e-mail) works through its parents (ten deals): per deal one listing, then
  rounds of bodies on ``fetch_threads`` fetch threads (each round's tokens are reserved on the
  job thread first; fetch threads hold no connection), then windows of messages on the job
  thread, with a checkpoint after each deal. Messages the ledger holds are not fetched again.

Every write happens on the job thread, in windows, in order.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator, Sequence
from typing import Any

from ferryman_worker.db import queries
from ferryman_worker.engine import windows
from ferryman_worker.engine.scope import Scope
from ferryman_worker.engine.source import RateLimited, SourceClient, SourceError
from ferryman_worker.providers import Request

ROUND_PER_THREAD = 8
"""Bodies per fetch thread in one round: the round's tokens are reserved on the job thread
first, then the fetch threads drain it with no barrier between bodies."""


def chunks(items: Sequence[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def walk(scope: Scope) -> None:
    """Walk the task's cursor the way its kind is walked."""
    if scope.kind.walk == "pages":
        walk_pages(scope)
    else:
        walk_tree(scope)


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
            queries.get("ledger_written", "engine.sql"),
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
