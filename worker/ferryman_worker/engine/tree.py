"""The tree walk: a task's parents (ten by default, by their source ids, text), in order; per
parent the listing of its children (page after page, in the kind's pagination), then each child's
body where the listing does not carry it, then the children in windows with a checkpoint after
the parent.

Source calls run on ``fetch_threads`` fetch threads in rounds: each round's tokens are reserved
on the job thread first, the fetch threads hold no database connection, and the job thread joins
the whole round before it writes, so no call is in flight while a transaction is open. Rounds
cross parent boundaries: the listings of the next parents are fetched side by side, and a round
of bodies may span parents, so the threads do not idle at the end of each parent. Once a round
is joined, every parent whose bodies are all in hand is written, in order. Children the ledger
holds are not fetched again, except in a delta run under a parent it wrote (new or changed):
those are read again and written through the version comparison. A stopped task refetches, on
resume, at most what it held (its last round, and the parent the round before left
half-fetched). A child whose body the source says is
gone (HTTP 404 or 410: deleted since it was listed) is recorded as a row error, not written; a
parent whose children's listing says so was deleted since its own listing, children and all: it
has none left to write. A parent whose children's listing ends short of the total it states
(``reconcile.parent``) fails its task, and with it the run (``ListingShort``).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import itertools
import logging
from collections.abc import Iterator
from typing import Any

from ferryman_worker import metrics
from ferryman_worker.db import queries
from ferryman_worker.engine import delta, paging, reconcile, windows
from ferryman_worker.engine.scope import Scope
from ferryman_worker.engine.source import SourceError
from ferryman_worker.errors import ListingShort
from ferryman_worker.providers import Kind

log = logging.getLogger("ferryman.engine")

ROUND_PER_THREAD = 8
"""Bodies per fetch thread in one round: the round's tokens are reserved on the job thread
first, then the fetch threads drain it with no barrier between bodies."""

Pool = concurrent.futures.ThreadPoolExecutor


def walk_tree(scope: Scope) -> None:
    """Parents from the task's offset on, in order; each is written, with its checkpoint, as
    soon as all its children's bodies are in hand; the last finishes the task."""
    parents: list[str] = [str(p) for p in scope.task["cursor"]["parents"]]
    first = int(scope.task["processed_offset"])
    if first >= len(parents):
        scope.commit_window([], first, finish=True)
        return
    threads = int(scope.options["fetch_threads"])
    room = threads * ROUND_PER_THREAD
    queue = _Queue(scope, parents, first)
    with Pool(threads, thread_name_prefix="fetch") as pool, metrics.fetch_threads(threads):
        while not queue.done:
            queue.list_until(room, pool, threads)
            fetch_bodies(scope, pool, queue.next_round(room))
            for parent in queue.pop_complete():
                _write_parent(scope, parent, last=parent.index == len(parents) - 1)


@dataclasses.dataclass
class _Parent:
    """One parent of a tree task: its children to fetch and the bodies fetched so far."""

    index: int
    """Its position in the task's parents: the checkpoint after it is ``index + 1``."""
    headers: list[dict[str, Any]]
    malformed: windows.Malformed
    skipped: int = 0
    """Children the ledger holds already: not fetched again, counted as skipped."""
    bodies: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    gone: set[int] = dataclasses.field(default_factory=set)
    """Positions whose body the source no longer has (recorded in ``malformed``)."""

    @property
    def complete(self) -> bool:
        return len(self.bodies) + len(self.gone) == len(self.headers)

    def missing(self) -> Iterator[_Body]:
        for position, header in enumerate(self.headers):
            if position not in self.bodies and position not in self.gone:
                yield _Body(self, position, header)

    def records(self) -> list[dict[str, Any]]:
        return [self.bodies[p] for p in range(len(self.headers)) if p not in self.gone]

    def lost(self, position: int, error: SourceError) -> None:
        """The body at ``position`` is gone from the source: a row error, not a row."""
        self.gone.add(position)
        source_id = self.headers[position].get("id")
        reason = f"gone from the source before its body was fetched: {error}"
        self.malformed.append((None if source_id is None else str(source_id), reason))


@dataclasses.dataclass(frozen=True)
class _Body:
    """A child whose body is to be fetched, and where the result goes."""

    parent: _Parent
    position: int
    header: dict[str, Any]


class _Queue:
    """The task's parents, listed ahead far enough to fill a round of bodies."""

    def __init__(self, scope: Scope, parents: list[str], first: int) -> None:
        self.scope = scope
        self.parents = parents
        self.next_index = first
        self.waiting: collections.deque[_Parent] = collections.deque()

    @property
    def done(self) -> bool:
        return self.next_index >= len(self.parents) and not self.waiting

    def list_until(self, room: int, pool: Pool, threads: int) -> None:
        """List parents, ``threads`` side by side, until ``room`` bodies wait to be fetched or
        none are left to list."""
        while self.next_index < len(self.parents) and self._unfetched() < room:
            batch = self.parents[self.next_index : self.next_index + threads]
            listed = _children_to_fetch(self.scope, pool, batch)
            for offset, (headers, malformed, skipped) in enumerate(listed):
                self.waiting.append(_Parent(self.next_index + offset, headers, malformed, skipped))
            self.next_index += len(batch)

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
    parts = list(windows.split(parent.records(), int(scope.options["window_size"]))) or [[]]
    for number, window in enumerate(parts):
        final = number == len(parts) - 1
        offset = parent.index + 1 if final else parent.index
        first = number == 0
        bad = parent.malformed if first else []
        skipped = parent.skipped if first else 0
        scope.commit_window(window, offset, bad, finish=final and last, skipped=skipped)


def _children_to_fetch(
    scope: Scope, pool: Pool, parents: list[str]
) -> list[tuple[list[dict[str, Any]], windows.Malformed, int]]:
    """Per parent: its children whose bodies are still to fetch (valid, and not in the ledger,
    unless a delta wrote the parent: then all of them), its malformed children, and how many
    it has in the ledger already (skipped, like a page's records the ledger holds)."""
    listed = _list(scope, pool, parents)
    validated = [windows.validate(scope.kind, headers) for headers in listed]
    field = scope.kind.id
    valid_ids = [{str(getattr(model, field, None)) for model in valid} for valid, _ in validated]
    written = {
        row["source_id"]
        for row in scope.conn.execute(
            queries.engine("ledger_written"),
            {
                "workspace": scope.run["workspace"],
                "kind": scope.kind.name,
                "source_ids": sorted(set().union(*valid_ids)),
            },
        )
    }
    renewed = delta.renewed_parents(scope.conn, scope.run, scope.kind, parents)
    found = []
    for p, headers, ids, (_, bad) in zip(parents, listed, valid_ids, validated, strict=True):
        wanted = ids if p in renewed else ids - written
        fetch = [h for h in headers if str(h.get(field)) in wanted]
        found.append((fetch, bad, len(ids) - len(wanted)))
    return found


def _list(scope: Scope, pool: Pool, parents: list[str]) -> list[list[dict[str, Any]]]:
    """Every child header of each parent: their listings side by side, page after page."""
    kind = scope.kind
    size = paging.page_size(scope.options, kind)
    children: dict[str, list[dict[str, Any]]] = {parent: [] for parent in parents}
    totals: dict[str, list[int]] = {parent: [] for parent in parents}
    at = {parent: paging.Position.start(kind) for parent in parents}
    pending = list(parents)
    while pending:
        requests = [
            paging.request(scope.provider, kind, at[p], size, {"id": p}, *scope.listing_extras)
            for p in pending
        ]
        more = []
        answers = scope.call_all(requests, pool.map, gone_ok=True)
        for parent, reply in zip(pending, answers, strict=True):
            if isinstance(reply, SourceError):  # gone, and its children with it
                log.info(
                    "%s %s is gone from the source: no %s to write (%s)",
                    kind.parent,
                    parent,
                    kind.name,
                    reply,
                )
                continue
            records = scope.provider.records(kind.name, reply)
            children[parent].extend(records)
            following = paging.following(
                kind, at[parent], reply, records, size, bound=scope.max_pages
            )
            listed = paging.Listed.of(kind, at[parent], reply, records, size, following)
            totals[parent].extend([] if listed.total is None else [listed.total])
            if following is not None:
                at[parent] = following
                more.append(parent)
            else:
                _reconcile(kind, parent, len(children[parent]), totals[parent], listed)
        pending = more
    return [children[parent] for parent in parents]


def _reconcile(
    kind: Kind, parent: str, listed: int, totals: list[int], last: paging.Listed
) -> None:
    """ListingShort when a parent's children listing ended short of its stated total."""
    short = reconcile.parent(kind, parent, listed, totals, last.ended_by or "")
    if short:
        raise ListingShort(short)


def fetch_bodies(scope: Scope, pool: Pool, round_: list[_Body]) -> None:
    """Fetch a round of bodies; each lands in its parent (a child whose listing carries all of
    it is in hand already)."""
    kind = scope.kind.name
    wanted: list[_Body] = []
    requests = []
    for item in round_:
        request = scope.provider.body(kind, item.header)
        if request is not None:
            request = request.with_options(scope.source_options)
        if request is None:
            item.parent.bodies[item.position] = item.header
        else:
            wanted.append(item)
            requests.append(request)
    if not requests:
        return
    for item, reply in zip(wanted, scope.call_all(requests, pool.map, gone_ok=True), strict=True):
        if isinstance(reply, SourceError):
            item.parent.lost(item.position, reply)
        else:
            merged = scope.provider.merge_body(kind, item.header, reply.body)
            item.parent.bodies[item.position] = merged
