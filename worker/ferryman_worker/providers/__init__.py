"""Providers: plug-ins that know one source API and its destination tables.

A provider declares its kinds, their phase order and how each is walked (a listing walked page by
page, or a tree: children listed per parent, bodies fetched one by one), maps source records with
pydantic models (a validation error marks a row malformed) and names, per kind, the SQL function
(installed by a migration) that writes a window of records and claims their ledger slots.
Providers are found through the ``ferryman.providers`` entry-point group; a provider package
outside ferryman registers its migrations (destination tables, writers) in the
``ferryman.migrations`` group (see ``db.migrate``). The built-in ``democrm`` talks to the demo
CRM API in ``hack/democrm``; its tables and writers are among ferryman's own migrations.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from ferryman_worker.errors import ConfigurationError

ENTRY_POINTS = "ferryman.providers"


@dataclasses.dataclass(frozen=True)
class Kind:
    """One collection of the source.

    ``walk``: "pages" (a listing, striped by start offset) or "tree" (for each ``parent`` row
    already written, list its children, then fetch each child's body).
    """

    name: str
    model: type[BaseModel]
    walk: Literal["pages", "tree"] = "pages"
    parent: str | None = None


@dataclasses.dataclass(frozen=True)
class Request:
    """An HTTP GET against the source, and the rate-limit tokens it costs."""

    path: str
    params: dict[str, Any]
    cost: int


@dataclasses.dataclass(frozen=True)
class Page:
    records: list[dict[str, Any]]
    more: bool


class Provider(Protocol):
    """What the engine needs from a provider."""

    name: str
    phases: tuple[tuple[str, ...], ...]
    kinds: dict[str, Kind]

    def listing(self, kind: str, start: int, limit: int) -> Request: ...

    def children(self, kind: str, parent_id: int, start: int, limit: int) -> Request: ...

    def body(self, kind: str, record: dict[str, Any]) -> Request: ...

    def parse_page(self, payload: Any) -> Page: ...

    def merge_body(self, record: dict[str, Any], payload: Any) -> dict[str, Any]: ...

    def writer(self, kind: str) -> str:
        """The SQL function writing a window of ``kind``: ``(rows jsonb, workspace text, kind
        text, run_id bigint) RETURNS integer``. It writes every row of the jsonb array and
        claims their ledger slots in one statement and returns how many it wrote; a row whose
        slot is taken makes it fail on the ledger's key."""
        ...


@functools.cache
def load(name: str) -> Provider:
    """The provider registered as ``name``; ConfigurationError lists the known ones."""
    found = {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINTS)}
    if name not in found:
        known = ", ".join(sorted(found)) or "none"
        raise ConfigurationError(
            f"spec.source.provider: no provider named {name!r} is installed (known: {known}); "
            f"providers register under the {ENTRY_POINTS!r} entry-point group"
        )
    provider: Provider = found[name].load()
    return provider


def phases_for(provider: Provider, kinds: list[str]) -> list[list[str]]:
    """The provider's phases restricted to ``kinds`` (all when empty), empty phases dropped.

    A tree kind needs its parent kind in the run: ConfigurationError otherwise.
    """
    wanted = set(kinds) if kinds else set(provider.kinds)
    unknown = wanted - set(provider.kinds)
    if unknown:
        raise ConfigurationError(
            f"spec.kinds: {sorted(unknown)} not provided by {provider.name!r}; "
            f"it provides {sorted(provider.kinds)}"
        )
    for name in wanted:
        parent = provider.kinds[name].parent
        if parent is not None and parent not in wanted:
            raise ConfigurationError(
                f"spec.kinds: {name!r} is walked from {parent!r}: add {parent!r} to the kinds"
            )
    phases = [[k for k in phase if k in wanted] for phase in provider.phases]
    return [phase for phase in phases if phase]
