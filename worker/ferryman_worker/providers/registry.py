"""Finds a run's provider: the declarative one its snapshot holds, else the one installed under
its name.

Installed providers are found through the ``ferryman.providers`` entry-point group; each entry
is a ``Provider`` (a subclass's instance). A provider package outside ferryman registers its
migrations (destination tables, writers) in the ``ferryman.migrations`` group (see
``db.migrate``).
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Mapping
from typing import Any

from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers.declarative import loading
from ferryman_worker.providers.model import Provider

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
    return loaded(found[name])


def loaded(entry: importlib.metadata.EntryPoint) -> Provider:
    """What ``entry`` names, which must be a ``Provider``: ConfigurationError otherwise."""
    provider = entry.load()
    if not isinstance(provider, Provider):
        raise ConfigurationError(
            f"the provider installed as {entry.name!r} ({entry.value}) is a"
            f" {type(provider).__name__}, not a Provider: register an instance of a subclass"
            " of ferryman_worker.providers.Provider"
        )
    return provider


def resolve(name: str, definition: Mapping[str, Any] | None = None) -> Provider:
    """The provider a run names: its declarative ``definition`` (a snapshot), else the one
    installed as ``name``."""
    if definition is None:
        return load(name)
    return loading.from_definition(name, definition)


def of_run(run: Mapping[str, Any]) -> Provider:
    """The provider of a run row (or an admission request's fields)."""
    return resolve(run["provider"], run.get("provider_definition"))
