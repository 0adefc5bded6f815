"""The two walks a task can do: a page walk (here) or a tree walk (``tree``).

A **page** walk fetches one listing page (with no transaction open) and writes it in windows; its
last window finishes the task and, for a full page, creates the next task of its stripe (start +
stripes x page size). Every write happens on the job thread, in windows, in order.
"""

from __future__ import annotations

from ferryman_worker.engine import tree, windows
from ferryman_worker.engine.scope import Scope


def walk(scope: Scope) -> None:
    """Walk the task's cursor the way its kind is walked."""
    if scope.kind.walk == "pages":
        walk_pages(scope)
    else:
        tree.walk_tree(scope)


def walk_pages(scope: Scope) -> None:
    """One listing page: fetch, write in windows, finish."""
    options = scope.options
    start, size = int(scope.task["cursor"]["start"]), int(options["page_size"])
    page = scope.provider.parse_page(
        scope.fetch(scope.provider.listing(scope.kind.name, start, size))
    )
    next_stripe = start + options["stripes"] * size if len(page.records) >= size else None
    offset = int(scope.task["processed_offset"])
    parts = list(windows.split(page.records[offset:], int(options["window_size"]))) or [[]]
    for window in parts[:-1]:
        offset += len(window)
        scope.commit_window(window, offset)
    scope.commit_window(parts[-1], offset + len(parts[-1]), finish=True, next_stripe=next_stripe)
