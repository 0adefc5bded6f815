"""The two walks a task can do: a page walk (here) or a tree walk (``tree``).

A **page** walk fetches one listing page (with no transaction open) and writes it in windows; its
last window finishes the task and, unless the listing ended there, creates the task of the next
page of its chain (for a striped style, ``stripes`` pages on: the stripes walk side by side).
Every write happens on the job thread, in windows, in order.
"""

from __future__ import annotations

from ferryman_worker.engine import paging, tree, windows
from ferryman_worker.engine.scope import Scope


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
    reply = scope.fetch(paging.request(scope.provider, kind, at, size, None, *scope.listing_extras))
    records = scope.provider.records(kind.name, reply)
    following = paging.following(kind, at, reply, records, size, int(options["stripes"]))
    offset = int(scope.task["processed_offset"])
    parts = list(windows.split(records[offset:], int(options["window_size"]))) or [[]]
    for window in parts[:-1]:
        offset += len(window)
        scope.commit_window(window, offset)
    scope.commit_window(parts[-1], offset + len(parts[-1]), finish=True, following=following)
