"""The two walks a task can do.

- A **page** walk fetches one listing page (with no transaction open) and writes it in windows;
  its last window finishes the task and, for a full page, creates the next task of its stripe
  (start + stripes x page size).
- A **tree** walk (e-mail) works through its parents (ten deals) in order: per deal one listing,
  then its bodies in rounds on ``fetch_threads`` fetch threads (each round's tokens are reserved
  on the job thread first; fetch threads hold no connection; a round may span deals, so the
  threads do not idle at the end of each deal), then, once a deal's bodies are all in hand and
  the round is joined, its messages in windows on the job thread, with a checkpoint after the
  deal. Messages the ledger holds are not fetched again.

Every write happens on the job thread, in windows, in order.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import itertools
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
    """Parents from the task's offset on, in order; each is written, with its checkpoint, as
    soon as all its children's bodies are in hand; the last finishes the task."""
    parents: list[int] = list(scope.task["cursor"]["parents"])
    first = int(scope.task["processed_offset"])
    if first >= len(parents):
        scope.commit_window([], first, finish=True)
        return
    threads = int(scope.options["fetch_threads"])
    room = threads * ROUND_PER_THREAD
    queue = _Queue(scope, parents, first)
    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="fetch") as pool:
        while not queue.done:
            queue.list_until(room)
            fetch_round(scope, pool, queue.next_round(room))
            for parent in queue.pop_complete():
                _write_parent(scope, parent, last=parent.index == len(parents) - 1)


@dataclasses.dataclass
class _Parent:
    """One parent of a tree task: its children to fetch and the bodies fetched so far."""

    index: int
    """Its position in the task's parents: the checkpoint after it is ``index + 1``."""
    headers: list[dict[str, Any]]
    malformed: windows.Malformed
    bodies: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return len(self.bodies) == len(self.headers)

    def missing(self) -> Iterator[_Body]:
        for position, header in enumerate(self.headers):
            if position not in self.bodies:
                yield _Body(self, position, header)

    def records(self) -> list[dict[str, Any]]:
        return [self.bodies[position] for position in range(len(self.headers))]


@dataclasses.dataclass(frozen=True)
class _Body:
    """A child whose body is to be fetched, and where the result goes."""

    parent: _Parent
    position: int
    header: dict[str, Any]


class _Queue:
    """The task's parents, listed ahead (on the job thread) far enough to fill a fetch round:
    rounds cross parent boundaries, so fetch threads do not idle at the tail of each parent."""

    def __init__(self, scope: Scope, parents: list[int], first: int) -> None:
        self.scope = scope
        self.parents = parents
        self.next_index = first
        self.waiting: collections.deque[_Parent] = collections.deque()

    @property
    def done(self) -> bool:
        return self.next_index >= len(self.parents) and not self.waiting

    def list_until(self, room: int) -> None:
        """List parents until ``room`` bodies wait to be fetched, or none are left to list."""
        while self.next_index < len(self.parents) and self._unfetched() < room:
            index = self.next_index
            headers, malformed = _children_to_fetch(self.scope, self.parents[index])
            self.waiting.append(_Parent(index, headers, malformed))
            self.next_index += 1

    def next_round(self, room: int) -> list[_Body]:
        return list(itertools.islice(self._missing(), room))

    def pop_complete(self) -> Iterator[_Parent]:
        """The parents at the head whose bodies are all in hand, in order."""
        while self.waiting and self.waiting[0].complete:
            yield self.waiting.popleft()

    def _missing(self) -> Iterator[_Body]:
        for parent in self.waiting:
            yield from parent.missing()

    def _unfetched(self) -> int:
        return sum(len(parent.headers) - len(parent.bodies) for parent in self.waiting)


def _write_parent(scope: Scope, parent: _Parent, *, last: bool) -> None:
    parts = list(chunks(parent.records(), int(scope.options["window_size"]))) or [[]]
    for number, window in enumerate(parts):
        final = number == len(parts) - 1
        offset = parent.index + 1 if final else parent.index
        bad = parent.malformed if number == 0 else []
        scope.commit_window(window, offset, bad, finish=final and last)


def _children_to_fetch(scope: Scope, parent: int) -> tuple[list[dict[str, Any]], windows.Malformed]:
    """A parent's children whose bodies are still to fetch (not in the ledger), and the
    malformed headers."""
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
    return [h for h in headers if str(h.get("id")) in valid_ids - written], malformed


def _list_children(scope: Scope, parent: int) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    size = int(scope.options["page_size"])
    while True:
        request = scope.provider.children(scope.kind.name, parent, len(records), size)
        page = scope.provider.parse_page(scope.fetch(request))
        records.extend(page.records)
        if not page.more or not page.records:
            return records


def fetch_round(
    scope: Scope, pool: concurrent.futures.ThreadPoolExecutor, round_: list[_Body]
) -> None:
    """Fetch a round of bodies on the fetch threads: reserve the round's tokens on the job
    thread, run the calls, join them all; retry what failed retryably. Each body lands in its
    parent."""
    failures = 0
    pending = round_
    while pending:
        requests = [scope.provider.body(scope.kind.name, item.header) for item in pending]
        scope.budget.reserve(scope.conn, sum(r.cost for r in requests))
        retry: list[_Body] = []
        for item, result in zip(pending, pool.map(_call(scope.client), requests), strict=True):
            if isinstance(result, RateLimited):
                scope.budget.pause(scope.conn, result.retry_after)
                retry.append(item)
            elif isinstance(result, SourceError):
                if not result.retryable:
                    raise result
                retry.append(item)
            else:
                item.parent.bodies[item.position] = scope.provider.merge_body(item.header, result)
        if retry:
            failures += 1
            if failures > scope.retry.attempts * 4:
                raise SourceError("message bodies kept failing", retryable=True)
            scope.gate(scope.conn)  # suspended or cancelled meanwhile: stop retrying
            scope.retry.sleep(min(failures, 5))
        pending = retry


def _call(client: SourceClient) -> Any:
    def call(request: Request) -> Any:
        try:
            return client.get(request)
        except SourceError as exc:
            return exc

    return call
