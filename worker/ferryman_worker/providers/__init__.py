"""Providers: plug-ins that know one source API.

A provider declares its kinds, their phase order and how each is walked: a listing walked page by
page (``pages``: stripes where the pagination knows its page tokens ahead, else one chain of pages
per part of the kind's split), or a ``tree`` (children listed per parent, page by page, and each
child's body fetched when the listing does not carry it). A kind's pagination style and stop
rules live in ``pagination``, its requests and response policy here. Records are validated by the
kind's pydantic model (a validation error marks a row malformed); a destination writes them
(``destinations``).

Providers are found through the ``ferryman.providers`` entry-point group; a provider package
outside ferryman registers its migrations (destination tables, writers) in the
``ferryman.migrations`` group (see ``db.migrate``). The built-in ``democrm`` talks to the demo
CRM API in ``hack/democrm``; its tables and writers are among ferryman's own migrations.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib.metadata
import itertools
from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers.pagination import Offset, Pagination, Reply, Request, dig
from ferryman_worker.providers.responses import ResponsePolicy

__all__ = [
    "ENTRY_POINTS",
    "AuthStyle",
    "ChangedSince",
    "Kind",
    "OAuth2",
    "Option",
    "Provider",
    "Reply",
    "Request",
    "ResponsePolicy",
    "Split",
    "dig",
    "load",
    "of_run",
    "options_for",
    "phases_for",
    "resolve",
]

ENTRY_POINTS = "ferryman.providers"


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


class Provider(Protocol):
    """What the engine needs from a provider."""

    name: str
    phases: tuple[tuple[str, ...], ...]
    kinds: dict[str, Kind]
    auth: AuthStyle

    def listing(self, kind: str, parent: Mapping[str, Any] | None) -> Request:
        """The first page's request of ``kind`` (of ``parent``'s children for a tree kind),
        without its paging parameters: the kind's pagination adds those."""
        ...

    def records(self, kind: str, reply: Reply) -> list[dict[str, Any]]:
        """The records of one listing page."""
        ...

    def body(self, kind: str, record: dict[str, Any]) -> Request | None:
        """The request for a tree child's body, or None when its listing carries all of it."""
        ...

    def merge_body(self, kind: str, record: dict[str, Any], body: Any) -> dict[str, Any]: ...

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


@dataclasses.dataclass(frozen=True)
class Option:
    """An option a provider takes in ``spec.source.options`` (given as text)."""

    type: Literal["string", "integer", "number", "boolean"] = "string"
    default: str | None = None
    """Its value when the run gives none; None: the run must give it."""


def options_for(provider: Provider, given: Mapping[str, str]) -> dict[str, Any]:
    """``spec.source.options`` checked against the options ``provider`` declares and typed, the
    defaults filled in; ConfigurationError, one line per problem, naming each field."""
    declared: Mapping[str, Option] = getattr(provider, "options", {})
    problems = [
        f"spec.source.options.{name}: {provider.name!r} has no option {name!r}"
        f" (it has: {', '.join(sorted(declared)) or 'none'})"
        for name in sorted(set(given) - set(declared))
    ]
    found: dict[str, Any] = {}
    for name, option in sorted(declared.items()):
        text = given.get(name, option.default)
        if text is None:
            problems.append(f"spec.source.options.{name}: required by {provider.name!r}; give it")
            continue
        try:
            found[name] = _typed(option.type, text)
        except ValueError:
            problems.append(f"spec.source.options.{name}: must be {option.type}; got {text!r}")
    if problems:
        raise ConfigurationError("\n".join(problems))
    return found


def _typed(kind: str, text: str) -> Any:
    if kind == "integer":
        return int(text)
    if kind == "number":
        return float(text)
    if kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise ValueError(text)
        return text.lower() == "true"
    return text


def resolve(name: str, definition: Mapping[str, Any] | None = None) -> Provider:
    """The provider a run names: its declarative ``definition`` (a snapshot), else the one
    installed as ``name``."""
    if definition is None:
        return load(name)
    from ferryman_worker.providers import declarative  # it builds on this module

    return declarative.from_definition(name, definition)


def of_run(run: Mapping[str, Any]) -> Provider:
    """The provider of a run row (or an admission request's fields)."""
    return resolve(run["provider"], run.get("provider_definition"))


def phases_for(provider: Provider, kinds: list[str]) -> list[list[str]]:
    """The provider's phases restricted to ``kinds`` (all when empty), empty phases dropped.

    A tree kind needs its parent kind in the run: ConfigurationError otherwise.
    """
    wanted = set(kinds) if kinds else set(provider.kinds)
    unknown = wanted - set(provider.kinds)
    if unknown:
        raise ConfigurationError(
            f"spec.kinds: {sorted(unknown)} not provided by {provider.name!r}; name only the"
            f" provider's kinds, {sorted(provider.kinds)} (or leave spec.kinds out for all)"
        )
    for name in wanted:
        parent = provider.kinds[name].parent
        if parent is not None and parent not in wanted:
            raise ConfigurationError(
                f"spec.kinds: {name!r} is walked from {parent!r}: add {parent!r} to the kinds"
            )
    phases = [[k for k in phase if k in wanted] for phase in provider.phases]
    return [phase for phase in phases if phase]
