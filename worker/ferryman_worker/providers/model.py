"""What a provider is made of: its kinds (how each is walked, split, paged and answered), its
auth style and the options it takes, and ``Provider``, the base class of every provider.

Every provider, declarative or written in Python, subclasses ``Provider`` and is built of these;
the package's front (``ferryman_worker.providers``) re-exports them with the registry that
finds providers (``registry``). This module imports nothing of the package's front, so
``declarative`` can build on it while the registry builds declarative providers from a run's
snapshot.
"""

from __future__ import annotations

import abc
import dataclasses
import datetime
import itertools
import types
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel

from ferryman_worker.providers.pagination import Offset, Pagination, Reply, Request
from ferryman_worker.providers.responses import ResponsePolicy


@dataclasses.dataclass(frozen=True)
class Split:
    """Parts of a kind walked side by side, each with the kind's own pagination and checkpoint:
    each part adds its query parameters to the kind's listing (an id range, a time window, one
    partition value). For APIs whose pages can only be reached by following a cursor; the
    ledger absorbs a record two parts both list."""

    parts: tuple[Mapping[str, Any], ...] = ({},)

    @classmethod
    def ranges(cls, low: str, high: str, bounds: list[Any]) -> Split:
        """``[bounds[i], bounds[i+1])`` as ``low``/``high`` parameters: id ranges or time
        windows."""
        return cls(tuple({low: a, high: b} for a, b in itertools.pairwise(bounds)))

    @classmethod
    def values(cls, param: str, values: list[Any]) -> Split:
        """One part per value of ``param`` (a status, a region, a partition)."""
        return cls(tuple({param: value} for value in values))


@dataclasses.dataclass(frozen=True)
class OAuth2:
    """An OAuth2 grant: ``client_credentials``, or ``refresh_token`` (rotating refresh tokens).
    ``token_url``: absolute, or a path on the run's base URL's host; ``keys``: which keys of the
    credential hold the client id, the client secret and the first refresh token."""

    grant: Literal["client_credentials", "refresh_token"]
    token_url: str
    scopes: tuple[str, ...] = ()
    client_auth: Literal["basic", "post"] = "basic"
    client_id_key: str = "client_id"
    client_secret_key: str = "client_secret"
    refresh_token_key: str = "refresh_token"

    def keys(self) -> dict[str, str]:
        """What each credential key is for (``client_id`` ...) mapped to the key's name."""
        keys = {"client_id": self.client_id_key, "client_secret": self.client_secret_key}
        if self.grant == "refresh_token":
            keys["refresh_token"] = self.refresh_token_key
        return keys


@dataclasses.dataclass(frozen=True)
class AuthStyle:
    """How the credential goes on a request: ``bearer`` (``Authorization: Bearer``), ``header``
    (an API key in header ``name``), ``query`` (an API key in parameter ``name``), ``basic``
    (HTTP basic from the credential's ``username`` and ``password`` keys), ``oauth2`` (a bearer
    token from the grant ``oauth2`` describes), ``none`` (an API without authentication)."""

    style: Literal["bearer", "header", "query", "basic", "oauth2", "none"] = "bearer"
    name: str = ""
    prefix: str = ""
    oauth2: OAuth2 | None = None


SINCE_FORMATS = ("iso8601", "sql", "unix", "unix_ms")


@dataclasses.dataclass(frozen=True)
class ChangedSince:
    """How a delta run asks a kind's listing for the records changed since a time, and which
    record field holds a record's version (its updated-at, or a revision number)."""

    param: str
    """The query parameter carrying the filter, e.g. updated_since or filter."""

    value: str = "{since}"
    """The parameter's value, {since} replaced by the time, e.g. "updated >= '{since}'"."""

    format: Literal["iso8601", "sql", "unix", "unix_ms"] = "iso8601"
    """How the time is written: iso8601 (2026-01-31T09:30:00Z), sql (2026-01-31
    09:30:00.000Z), unix (seconds) or unix_ms (milliseconds)."""

    version: str = ""
    """The record field holding its version; "": a hash of the record is its version."""

    version_type: Literal["datetime", "integer"] = "datetime"
    """The version field's type: a time, or an integer that grows with each change."""

    deleted: str = ""
    """A record field whose true value marks a tombstone in the listing: a record deleted
    since; "": the listing reports no deletions."""

    def params(self, since: datetime.datetime) -> dict[str, str]:
        """The query parameter asking for the records changed at or after ``since`` (written
        to the second, rounded down)."""
        at = since.astimezone(datetime.UTC).replace(microsecond=0)
        if self.format == "unix":
            text = str(int(at.timestamp()))
        elif self.format == "unix_ms":
            text = str(int(at.timestamp()) * 1000)
        elif self.format == "sql":
            text = at.strftime("%Y-%m-%d %H:%M:%S.000Z")
        else:
            text = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        return {self.param: self.value.replace("{since}", text)}


@dataclasses.dataclass(frozen=True)
class Kind:
    """One collection of the source.

    ``walk``: "pages" (a listing) or "tree" (for each ``parent`` row already written, list its
    children, then fetch each child's body). ``pagination``: how its pages follow each other and
    when they end; ``split``: its parts walked side by side; ``policy``: what the source's
    answers mean; ``max_page_size``: the largest page the source serves for it.
    """

    name: str
    model: type[BaseModel]
    walk: Literal["pages", "tree"] = "pages"
    parent: str | None = None
    pagination: Pagination = dataclasses.field(default_factory=Offset)
    split: Split = Split()
    policy: ResponsePolicy = dataclasses.field(default_factory=ResponsePolicy)
    max_page_size: int = 500
    changed_since: ChangedSince | None = None
    """How a delta run lists only what changed; None: a delta lists the kind whole and the
    ledger skips what is unchanged (a hash of each record is its version)."""
    id: str = "id"
    """The record field holding its source id (what the ledger keys it by, unless the run's
    mapping says otherwise)."""
    verify_query: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Query parameters a verification adds to the kind's listing so the source sends little
    more than each record's id (e.g. ``{"fields": "id"}``); empty: the whole records."""

    @property
    def id_pointer(self) -> str:
        """The JSON pointer of ``id`` in a record."""
        return "/" + self.id.replace("~", "~0").replace("/", "~1")


@dataclasses.dataclass(frozen=True)
class Option:
    """An option a provider takes in ``spec.source.options`` (given as text)."""

    type: Literal["string", "integer", "number", "boolean"] = "string"
    default: str | None = None
    """Its value when the run gives none; None: the run must give it."""


class Provider(abc.ABC):
    """What the engine needs from a provider; every provider subclasses it, declarative
    (``declarative.DeclaredProvider``) or written in Python (``democrm.DemoCRM``).

    A subclass names itself, its phases, its kinds and its auth style, and says how a kind is
    listed, where a page's records are, and how a tree child's body is fetched and merged. What
    it leaves out has a default: no options, no kinds, no SQL writer of its own.
    """

    name: str
    phases: tuple[tuple[str, ...], ...]
    kinds: Mapping[str, Kind] = types.MappingProxyType({})
    auth: AuthStyle
    options: Mapping[str, Option] = types.MappingProxyType({})
    """The options a run may give in ``spec.source.options``, by name."""

    @abc.abstractmethod
    def listing(self, kind: str, parent: Mapping[str, Any] | None) -> Request:
        """The first page's request of ``kind`` (of ``parent``'s children for a tree kind),
        without its paging parameters: the kind's pagination adds those."""

    @abc.abstractmethod
    def records(self, kind: str, reply: Reply) -> list[dict[str, Any]]:
        """The records of one listing page."""

    @abc.abstractmethod
    def body(self, kind: str, record: dict[str, Any]) -> Request | None:
        """The request for a tree child's body, or None when its listing carries all of it."""

    @abc.abstractmethod
    def merge_body(self, kind: str, record: dict[str, Any], body: Any) -> dict[str, Any]:
        """``record`` with the ``body`` its body request answered merged in."""

    def writer(self, kind: str) -> str | None:
        """The SQL function writing a window of ``kind``: ``(rows jsonb, workspace text, kind
        text, run_id bigint) RETURNS integer``. It writes every row of the jsonb array and
        claims their ledger slots in one statement and returns how many it wrote; a row whose
        slot is taken makes it fail on the ledger's key. None (or ""): the provider has none,
        and the run's mapping or the landing table takes the kind."""
        return None
