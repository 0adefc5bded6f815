"""Providers: plug-ins that know one source API.

A provider declares its kinds, their phase order and how each is walked: a listing walked page by
page (``pages``: stripes where the pagination knows its page tokens ahead, else one chain of pages
per part of the kind's split), or a ``tree`` (children listed per parent, page by page, and each
child's body fetched when the listing does not carry it). A kind's pagination style and stop
rules live in ``pagination``, its response policy in ``responses``, what a kind and a provider
are in ``model``; this module re-exports them and finds a run's provider (``resolve``).
Records are validated by the kind's pydantic model (a validation error marks a row malformed); a
destination writes them (``destinations``).

Providers are found through the ``ferryman.providers`` entry-point group; a provider package
outside ferryman registers its migrations (destination tables, writers) in the
``ferryman.migrations`` group (see ``db.migrate``). The built-in ``democrm`` talks to the demo
CRM API in ``hack/democrm``; its tables and writers are among ferryman's own migrations.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Mapping
from typing import Any

from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import declarative
from ferryman_worker.providers.model import (
    AuthStyle,
    ChangedSince,
    Kind,
    OAuth2,
    Option,
    Provider,
    Split,
)
from ferryman_worker.providers.pagination import Reply, Request, dig
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
