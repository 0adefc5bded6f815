"""The mapping a run is admitted with: the one it gives (``spec.mapping``) checked against its
provider, else the one shipped for the provider (``builtin``), and what the run keeps of it
(``snapshot``): the mapping and what the catalog says of its tables, from which every worker
generates the same writers (``writers``).
"""

from __future__ import annotations

import importlib.resources
from typing import Any

from ferryman_worker.db.connect import Connection
from ferryman_worker.destination_policy import Policy
from ferryman_worker.destinations import catalog, pointers
from ferryman_worker.destinations.mapping import Mapping, dump, load_file, parse
from ferryman_worker.errors import MappingInvalid
from ferryman_worker.providers import Provider

PACKAGE = "ferryman_worker.destinations"
"""The package whose ``mappings/`` folder holds the shipped mappings."""


def snapshot(
    conn: Connection, mapping: Mapping, kinds: list[str], allowed: Policy | None = None
) -> dict[str, Any]:
    """What a run keeps of its mapping: the mapping and what the catalog says of its tables.
    MappingInvalid, one line per problem, if the mapping cannot write here (``allowed``: the
    installation's destinations; default: its defaults)."""
    report = catalog.check(conn, mapping, kinds, allowed)
    if report.problems:
        raise MappingInvalid(
            f"mapping for {mapping.provider!r} cannot write here:\n  "
            + "\n  ".join(report.problems)
        )
    return {
        "mapping": dump(mapping),
        "catalog": {k: c.model_dump(mode="json") for k, c in report.catalogs.items()},
    }


def builtin(provider: str) -> Mapping | None:
    """The mapping shipped with ferryman for ``provider`` (``mappings/<provider>.yaml``)."""
    path = importlib.resources.files(PACKAGE).joinpath("mappings", f"{provider}.yaml")
    if not path.is_file():
        return None
    with importlib.resources.as_file(path) as file:
        return load_file(file)


def mapping_for(document: object | None, provider: Provider) -> Mapping | None:
    """The run's mapping: ``document`` (``spec.mapping``, parsed) validated, or, if there is
    none, the one shipped for the provider. MappingInvalid names what does not fit."""
    mapping = parse(document, source="spec.mapping") if document is not None else None
    if mapping is None:
        found = builtin(provider.name)
        return None if found is None else pointers.with_provider_ids(found, provider)
    if mapping.provider != provider.name:
        raise MappingInvalid(
            f"spec.mapping.provider: the mapping is for {mapping.provider!r}, the run's "
            f"provider is {provider.name!r}: use a mapping written for {provider.name!r}"
        )
    unknown = sorted(set(mapping.kinds) - set(provider.kinds))
    if unknown:
        raise MappingInvalid(
            f"spec.mapping.kinds: {unknown} not provided by {provider.name!r}; it provides "
            f"{sorted(provider.kinds)}"
        )
    return pointers.with_provider_ids(mapping, provider)
