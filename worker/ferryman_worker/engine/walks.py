"""The two walks a task can do: a page walk (here) or a tree walk (``tree``).

A **page** walk fetches one listing page (with no transaction open) and writes it in windows; its
last window finishes the task and, unless the listing ended there, creates the task of the next
page of its chain (for a striped style, ``stripes`` pages on: the stripes walk side by side).
Every write happens on the job thread, in windows, in order.
"""

from __future__ import annotations

import logging
from typing import Any

from ferryman_worker.engine import paging, tree
from ferryman_worker.engine.scope import Scope
from ferryman_worker.engine.source import SourceError
from ferryman_worker.providers import Reply

log = logging.getLogger("ferryman.engine")


def walk(scope: Scope) -> None:
    """Walk the task's cursor the way its kind is walked."""
    if scope.kind.walk == "pages":
        walk_pages(scope)
    else:
        tree.walk_tree(scope)


def walk_pages(scope: Scope) -> None:
    """One listing page: fetch, write in windows from the task's offset inside it, finish."""
    options, kind = scope.options, scope.kind
    at, size = paging.Position.of(scope.task["cursor"]), paging.page_size(options, kind)
    at, reply, offset = fetch_page(scope, at, size)
    records = scope.provider.records(kind.name, reply)
    stripes = int(options["stripes"])
    following = paging.following(kind, at, reply, records, size, stripes, scope.max_pages)
    listed = paging.Listed.of(kind, at, reply, records, size, following)
    size = int(options["window_size"])
    rest = records[offset:]
    parts = _windows(rest, offset, size, scope.to_write(rest))
    for window, end, skipped in parts[:-1]:
        scope.commit_window(window, end, skipped=skipped)
    window, end, skipped = parts[-1]
    scope.commit_window(
        window, end, finish=True, following=following, listed=listed, skipped=skipped
    )


def _windows(
    records: list[Any], offset: int, size: int, to_write: list[bool] | None
) -> list[tuple[list[Any], int, int]]:
    """The windows of a page's ``records`` (those after the task's ``offset`` in it), each as
    (its records to write, the checkpoint after it, how many of its records the ledger holds and
    are left out: ``to_write`` False; None: none). A window the ledger holds whole writes
    nothing and needs no statement: its count and checkpoint go with the next window's. The last
    window finishes the task, even when it writes nothing."""
    parts: list[tuple[list[Any], int, int]] = []
    skipped = 0
    for start in range(0, len(records), size):
        window = records[start : start + size]
        offset += len(window)
        fresh = window if to_write is None else _kept(window, to_write[start : start + size])
        skipped += len(window) - len(fresh)
        if fresh:
            parts.append((fresh, offset, skipped))
            skipped = 0
    if skipped or not parts:
        parts.append(([], offset, skipped))
    return parts


def _kept(window: list[Any], keep: list[bool]) -> list[Any]:
    return [record for record, kept in zip(window, keep, strict=True) if kept]


def fetch_page(scope: Scope, at: paging.Position, size: int) -> tuple[paging.Position, Reply, int]:
    """The page at ``at``, its position and the task's offset inside it; when the source says
    the page's token is gone (expired), the chain's first page instead, written from its start
    (the ledger holds what it lists again)."""
    kind, extras = scope.kind, scope.listing_extras
    request = paging.request(scope.provider, kind, at, size, None, *extras)
    answer = scope.call_all([request], gone_ok=at.restartable(kind))[0]
    if not isinstance(answer, SourceError):
        return at, answer, int(scope.task["processed_offset"])
    at = at.restarted(kind, answer)
    log.info("%s: %s; the chain begins again at its first page", kind.name, answer)
    return at, scope.fetch(paging.request(scope.provider, kind, at, size, None, *extras)), 0
