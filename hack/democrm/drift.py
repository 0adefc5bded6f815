"""Records deleted and created while a client walks a listing (``POST /_drift``), to show what
each paging style does when the source changes under it (offsets drift; ids do not).

A change names a kind (``organizations`` or ``people``: kinds nothing else is listed under),
ids to ``delete`` and ids to ``create`` (ids of the dataset deleted before: created again, as
they were), ``expire_cursors`` (every cursor given out so far, of any listing, answers 410 Gone
from then on), and ``after_pages``: how many more pages of that kind the server answers before
the change is applied (0: at once). A change that waits is applied right after the answer of its
last page is built, so the client's next request sees it. Nothing else about a record changes,
and the ground truth is the dataset as it is now.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KINDS = ("organizations", "people")


class ChangeError(ValueError):
    """A change the dataset cannot take; the message names the field."""


@dataclass(frozen=True)
class Change:
    kind: str
    delete: frozenset[int]
    create: frozenset[int]
    after_pages: int
    expire_cursors: bool = False

    @classmethod
    def parse(cls, body: Mapping[str, Any], counts: Mapping[str, int]) -> Change:
        unknown = sorted(set(body) - {"kind", "delete", "create", "after_pages", "expire_cursors"})
        if unknown:
            raise ChangeError(f"unknown field(s): {', '.join(unknown)}")
        kind = body.get("kind")
        if kind not in KINDS:
            raise ChangeError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        after = body.get("after_pages", 0)
        if not isinstance(after, int) or isinstance(after, bool) or not 0 <= after <= 10**6:
            raise ChangeError(f"after_pages must be an integer from 0, got {after!r}")
        delete, create = (ids(body, name, counts[kind]) for name in ("delete", "create"))
        if delete & create:
            raise ChangeError(f"ids both deleted and created: {sorted(delete & create)[:5]}")
        expire = body.get("expire_cursors", False)
        if not isinstance(expire, bool):
            raise ChangeError(f"expire_cursors must be true or false, got {expire!r}")
        return cls(kind, delete, create, after, expire)


def ids(body: Mapping[str, Any], name: str, count: int) -> frozenset[int]:
    values = body.get(name, [])
    if not isinstance(values, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= count for v in values
    ):
        raise ChangeError(f"{name} must be a list of ids of the dataset (1..{count})")
    return frozenset(values)


class Drift:
    """The deleted ids per kind and the changes waiting for their page."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deleted: dict[str, set[int]] = {kind: set() for kind in KINDS}
        self._waiting: list[tuple[Change, int]] = []  # (change, pages still to answer)
        self._applied = 0
        self.epoch = 0
        """Cursors given out before the last change that expired them carry an older epoch."""

    def add(self, change: Change) -> None:
        with self._lock:
            if change.after_pages == 0:
                self._apply(change)
            else:
                self._waiting.append((change, change.after_pages))

    def deleted(self, kind: str) -> tuple[int, ...]:
        """The kind's deleted record indices (id - 1), sorted."""
        gone = self._deleted.get(kind)
        if not gone:
            return ()
        with self._lock:
            return tuple(sorted(i - 1 for i in gone))

    def answered(self, kind: str) -> None:
        """A page of ``kind`` was built: apply the changes that waited for it."""
        if not self._waiting:
            return
        with self._lock:
            waiting = []
            for change, pages in self._waiting:
                if change.kind == kind:
                    pages -= 1
                if pages == 0:
                    self._apply(change)
                else:
                    waiting.append((change, pages))
            self._waiting = waiting

    def view(self) -> dict[str, Any]:
        with self._lock:
            return {
                "deleted": {kind: sorted(ids) for kind, ids in self._deleted.items()},
                "waiting": len(self._waiting),
                "applied": self._applied,
                "cursor_epoch": self.epoch,
            }

    def _apply(self, change: Change) -> None:
        gone = self._deleted[change.kind]
        gone |= change.delete
        gone -= change.create
        self.epoch += change.expire_cursors
        self._applied += 1
