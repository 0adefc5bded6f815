"""Changes between runs: records edited, added and deleted while the server runs (for delta runs).

Off until the first ``POST /_changes``, so every other mode serves exactly what it always did.
Once on, the listings of organizations, people and deals carry each record's ``updated_at``
(``2015-01-01T00:00:00.000000Z`` for a record never changed since the server started) and take
``updated_since`` (ISO 8601; only the records changed at or after it, and a tombstone
``{"id", "deleted": true, "updated_at"}`` for each record deleted at or after it); a deleted
record is no longer listed otherwise (the listing's offsets shift, as a real API's do), and
added records follow the dataset's last ones, generated from the seed like them. A message's
edit appends `` (edit N)`` to its subject and moves its deal's ``updated_at`` (as a CRM's
last-activity time does; the deal's title stays). ``GET /_changes`` lists what changed.
"""

import datetime
import threading
from collections.abc import Callable
from typing import Any

from democrm.data import EPOCH, LISTED

UNCHANGED = datetime.datetime.fromtimestamp(EPOCH, datetime.UTC)
EDITED_FIELD = {"organizations": "name", "people": "name", "deals": "title"}
"""The field an edit changes: " (edit N)" is appended to it."""


def stamp(at: datetime.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ChangeError(ValueError):
    """A ``POST /_changes`` body that does not fit; the message names the field."""


class Changes:
    """What changed since the server started, per listed kind (by record index, id - 1)."""

    def __init__(self) -> None:
        self.active = False
        self.edits: dict[str, dict[int, tuple[datetime.datetime, int]]] = {k: {} for k in LISTED}
        """Index -> (when it last changed, how many edits it had)."""
        self.deleted: dict[str, dict[int, datetime.datetime]] = {k: {} for k in LISTED}
        self.added: dict[str, int] = dict.fromkeys(LISTED, 0)
        self.messages: dict[int, int] = {}
        """Message index (id - 1) -> how many edits it had."""
        self._lock = threading.Lock()

    def apply(
        self,
        body: dict[str, Any],
        counts: dict[str, int],
        deal_of: Callable[[int], int | None] = lambda _: None,
    ) -> dict[str, Any]:
        """``{"update": {kind: [ids]}, "delete": {kind: [ids]}, "add": {kind: n}}``, every
        part optional (``{}`` only switches the mode on); ``counts``: the dataset's sizes;
        ``deal_of``: the deal index of a message id (None: no such message), for
        ``update.messages``. ChangeError, changing nothing, for an unknown part, kind or id."""
        unknown = sorted(set(body) - {"update", "delete", "add"})
        if unknown:
            raise ChangeError(f"unknown part(s): {', '.join(unknown)} (use update, delete, add)")
        now = datetime.datetime.now(datetime.UTC)
        with self._lock:
            update, messages = self._messages(body.get("update", {}), deal_of)
            plan = [
                *self._ids(update, counts, "update"),
                *self._ids(body.get("delete", {}), counts, "delete"),
            ]
            added = self._added(body.get("add", {}))
            self.active = True
            for part, kind, index in plan:
                if part == "update":
                    edits = self.edits[kind].get(index, (now, 0))[1]
                    self.edits[kind][index] = (now, edits + 1)
                else:
                    self.deleted[kind][index] = now
            for index, deal in messages:
                self.messages[index] = self.messages.get(index, 0) + 1
                self.edits["deals"][deal] = (now, self.edits["deals"].get(deal, (now, 0))[1])
            for kind, n in added.items():
                first = counts[kind] + self.added[kind]
                for index in range(first, first + n):
                    self.edits[kind][index] = (now, 0)
                self.added[kind] += n
            return self.view()

    def _ids(self, part: Any, counts: dict[str, int], name: str) -> list[tuple[str, str, int]]:
        if not isinstance(part, dict):
            raise ChangeError(f"{name} must be an object of kind -> list of ids")
        found = []
        for kind, ids in part.items():
            if kind not in LISTED:
                raise ChangeError(f"{name}.{kind}: not a listed kind ({', '.join(LISTED)})")
            size = counts[kind] + self.added[kind]
            if not isinstance(ids, list) or not all(
                isinstance(i, int) and 1 <= i <= size for i in ids
            ):
                raise ChangeError(f"{name}.{kind}: must be a list of ids from 1 to {size}")
            found += [(name, kind, i - 1) for i in ids]
        return found

    @staticmethod
    def _messages(
        part: Any, deal_of: Callable[[int], int | None]
    ) -> tuple[Any, list[tuple[int, int]]]:
        """``update`` without its messages, and each edited message's (index, deal index)."""
        if not isinstance(part, dict) or "messages" not in part:
            return part, []
        ids = part["messages"]
        deals = (
            [deal_of(i) if isinstance(i, int) else None for i in ids]
            if isinstance(ids, list)
            else [None]
        )
        if None in deals:
            raise ChangeError("update.messages: must be a list of ids of existing messages")
        rest = {kind: value for kind, value in part.items() if kind != "messages"}
        return rest, [(i - 1, d) for i, d in zip(ids, deals, strict=True) if d is not None]

    def _added(self, part: Any) -> dict[str, int]:
        if not isinstance(part, dict) or not all(
            kind in LISTED and isinstance(n, int) and 0 <= n <= 100_000 for kind, n in part.items()
        ):
            raise ChangeError(f"add must be an object of kind -> count ({', '.join(LISTED)})")
        return dict(part)

    def count(self, kind: str, base: int) -> int:
        """Records of ``kind`` ever listed: the dataset's and the added ones."""
        return base + self.added[kind]

    def listed(self, kind: str, base: int, since: datetime.datetime | None) -> list[int]:
        """Indices of the records a listing serves, in order: not deleted, and with ``since``
        changed at or after it."""
        with self._lock:
            deleted = self.deleted[kind]
            if since is not None and since > UNCHANGED:
                edits = self.edits[kind]
                changed = {i for i, (at, _) in edits.items() if at >= since and i not in deleted}
                gone = {i for i, at in deleted.items() if at >= since}
                return sorted(changed | gone)
            return [i for i in range(self.count(kind, base)) if i not in deleted]

    def revise(self, kind: str, index: int, record: dict[str, Any]) -> dict[str, Any]:
        """The record as it is now: its edits applied, its ``updated_at`` set; a deleted one's
        tombstone (``{"id", "deleted": true, "updated_at"}``)."""
        if index in self.deleted[kind]:
            return {
                "id": index + 1,
                "deleted": True,
                "updated_at": stamp(self.deleted[kind][index]),
            }
        at, edits = self.edits[kind].get(index, (UNCHANGED, 0))
        revised = {**record, "updated_at": stamp(at)}
        field = EDITED_FIELD[kind]
        if edits and isinstance(revised.get(field), str):
            revised[field] = f"{revised[field]} (edit {edits})"
        return revised

    def revise_message(self, index: int, record: dict[str, Any]) -> dict[str, Any]:
        """A message's header as it is now: its edits appended to its subject."""
        with self._lock:
            edits = self.messages.get(index, 0)
        if edits and isinstance(record.get("subject"), str):
            return {**record, "subject": f"{record['subject']} (edit {edits})"}
        return record

    def view(self) -> dict[str, Any]:
        """What changed, by kind: ids updated (with their edit count), deleted, added."""
        return {
            "active": self.active,
            "updated": {
                **{
                    k: {str(i + 1): n for i, (_, n) in e.items() if n}
                    for k, e in self.edits.items()
                },
                "messages": {str(i + 1): n for i, n in self.messages.items()},
            },
            "deleted": {k: sorted(i + 1 for i in d) for k, d in self.deleted.items()},
            "added": dict(self.added),
        }


def parse_since(text: str) -> datetime.datetime:
    """``updated_since`` as an aware time (a time without a zone is UTC); ValueError if not
    ISO 8601."""
    at = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return at if at.tzinfo is not None else at.replace(tzinfo=datetime.UTC)
