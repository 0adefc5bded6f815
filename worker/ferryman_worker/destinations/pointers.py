"""Whether a mapping's pointers can resolve in the records its provider declares.

A mapping reads a record through JSON pointers (its ``sourceId``, each column's ``field``, each
reference's and join's ``field``); a record holds only the fields its provider declares (a
declarative provider's ``fields``, a Python provider's record model). A pointer whose first
token names no declared field resolves to nothing in every record: a column always null, a
reference never found, a source id missing from every ledger slot. ``unresolved`` names each,
by its YAML path; a kind whose provider's model takes undeclared fields is not checked. A
``sourceId`` a mapping leaves out is the provider's declared id (``with_provider_ids``).
"""

from __future__ import annotations

from collections.abc import Iterator

from ferryman_worker.destinations.mapping import KindMapping, Mapping
from ferryman_worker.providers import Kind, Provider


def with_provider_ids(mapping: Mapping, provider: Provider) -> Mapping:
    """``mapping`` with each kind's ``sourceId``, where it gives none, the provider's declared
    ``id`` of the kind (``/id`` unless the provider says otherwise)."""
    kinds = {
        name: kind
        if "source_id" in kind.model_fields_set or name not in provider.kinds
        else kind.model_copy(update={"source_id": provider.kinds[name].id_pointer})
        for name, kind in mapping.kinds.items()
    }
    return mapping.model_copy(update={"kinds": kinds})


def unresolved(mapping: Mapping, provider: Provider) -> list[str]:
    """One line per pointer of ``mapping`` that names no field ``provider`` declares."""
    problems = []
    for name, mapped in mapping.kinds.items():
        kind = provider.kinds.get(name)
        if kind is None or kind.model.model_config.get("extra") == "allow":
            continue
        fields = set(kind.model.model_fields)
        for path, pointer in _pointers(mapped):
            if _first(pointer) not in fields:
                problems.append(f"kinds.{name}.{path}: {_why(provider, kind, pointer, path)}")
    return problems


def _why(provider: Provider, kind: Kind, pointer: str, path: str) -> str:
    declared = ", ".join(sorted(kind.model.model_fields))
    text = (
        f"{pointer} cannot resolve: {provider.name!r} declares no field"
        f" {_first(pointer)!r} for {kind.name} (it declares {declared})"
    )
    if path == "sourceId":
        return f"{text}; its declared id is {kind.id!r}: set sourceId: {kind.id_pointer}"
    return f"{text}: point it at one of them"


def _pointers(mapped: KindMapping) -> Iterator[tuple[str, str]]:
    """(YAML path, pointer) of every pointer the kind's mapping reads."""
    yield "sourceId", mapped.source_id
    for name, column in mapped.columns.items():
        for read in column.reads():
            yield f"columns.{name}.{read.path}", read.pointer
    for number, join in enumerate(mapped.joins):
        yield f"joins[{number}].field", join.field


def _first(pointer: str) -> str:
    return pointer[1:].split("/")[0].replace("~1", "/").replace("~0", "~")
