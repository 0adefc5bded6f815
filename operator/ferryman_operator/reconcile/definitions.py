"""What a run's ``spec.source.provider`` and ``spec.mapping`` name, decided at admission from
what the API server holds in the run's namespace: a MigrationProvider of that name (else a
built-in provider, else the run is refused), and the MigrationMapping ``spec.mapping.name``
names. Each is checked by its model here (one line per problem) and handed to admission, which
checks the mapping against the database's catalog and snapshots both into the run: a run, once
admitted, never reads them again."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from ferryman_operator.reconcile.status import Refusal
from ferryman_worker import contract
from ferryman_worker.runspec import RETRY_ANNOTATION

RETRY: Final = f"then retry the run (annotate it {RETRY_ANNOTATION}=<any new value>)"


@dataclasses.dataclass(frozen=True)
class Resolved:
    """What admission snapshots into the run."""

    provider: dict[str, Any] | None = None
    """The MigrationProvider's definition; None: the built-in provider of that name."""

    mapping: dict[str, Any] | None = None
    """The MigrationMapping's mapping; None: the run names none."""


def provider_of(
    name: str, namespace: str, found: Mapping[str, Any] | None, installed: bool
) -> dict[str, Any] | Refusal | None:
    """The definition of the MigrationProvider ``found`` (None: there is none of that name in
    the run's namespace), None for the built-in provider when there is none but ``installed``
    says a built-in exists, or why the run is refused."""
    if found is None:
        if installed:
            return None
        return Refusal(
            "ProviderNotFound",
            f"spec.source.provider: there is no MigrationProvider {name!r} in namespace "
            f"{namespace!r} and no built-in provider {name!r}: create the MigrationProvider "
            f"there (`kubectl apply -n {namespace} -f provider.yaml`, its metadata.name {name}),"
            f" or name a built-in provider, {RETRY}",
        )
    where = f"spec.source.provider: MigrationProvider {name!r} in namespace {namespace!r}"
    unordered = _unordered(found.get("spec"))
    if unordered:
        return Refusal(
            "ProviderInvalid",
            f"{where}: spec.phases: required when there is more than one kind: the API server "
            "keeps the keys of spec.kinds in alphabetical order, not in the order written, so "
            f"the order the kinds are imported in must be declared, e.g. phases: {unordered}\n"
            f"fix the MigrationProvider, {RETRY}",
        )
    try:
        return contract.provider_definition(name, found.get("spec"), where)
    except contract.ConfigurationError as exc:
        return Refusal("ProviderInvalid", f"{exc}\nfix the MigrationProvider, {RETRY}")


def kinds_of(
    run: contract.MigrationRun, provider: dict[str, Any] | None, declared: bool
) -> Refusal | None:
    """Why the run is refused for its ``spec.kinds`` (a kind its provider does not have, a tree
    kind without its parent), decided before it may wait in its workspace's queue; None when
    they fit. ``provider``: the definition it would be admitted with (None: the built-in);
    ``declared``: the provider is a MigrationProvider, which a change may mend."""
    problem = contract.kinds_refused(run, provider)
    if problem is None:
        return None
    fix = "spec.kinds is immutable: create a new MigrationRun with the kinds fixed"
    if declared:
        name, namespace = run.spec.source.provider, run.metadata.namespace
        fix += (
            f", or change MigrationProvider {name!r} in namespace {namespace!r} to provide "
            "them (the run is examined again when it changes)"
        )
    return Refusal("KindsInvalid", f"{problem}\n{fix}")


def _unordered(spec: object) -> str:
    """A MigrationProvider spec of several kinds without ``phases``: an example of the phases
    to declare (its kinds as the API server lists them); "" when nothing is missing."""
    if not isinstance(spec, Mapping) or spec.get("phases") is not None:
        return ""
    kinds = spec.get("kinds")
    if not isinstance(kinds, Mapping) or len(kinds) < 2:
        return ""
    return "[" + ", ".join(f"[{kind}]" for kind in kinds) + "]"


def mapping_of(
    ref: Any, namespace: str, found: Mapping[str, Any] | None
) -> dict[str, Any] | Refusal | None:
    """The mapping of the MigrationMapping ``found`` that ``ref`` (``spec.mapping``) names
    (None: there is none of that name in the run's namespace), None when the run names no
    mapping, or why the run is refused."""
    if ref is None:
        return None
    if ref.file is not None:
        return Refusal("InvalidSpec", contract.mapping_file_refused(ref.file))
    if found is None:
        return Refusal(
            "MappingNotFound",
            f"spec.mapping.name: there is no MigrationMapping {ref.name!r} in namespace "
            f"{namespace!r}: create it there (`kubectl apply -n {namespace} -f mapping.yaml`, "
            f"kind MigrationMapping, its metadata.name {ref.name}), {RETRY}",
        )
    where = f"spec.mapping.name: MigrationMapping {ref.name!r} in namespace {namespace!r}"
    try:
        return contract.mapping_document(found.get("spec"), f"{where}, its spec")
    except contract.ConfigurationError as exc:
        return Refusal("MappingInvalid", f"{exc}\nfix the MigrationMapping, {RETRY}")


def refused_by_catalog(ref: Any, namespace: str, error: Exception) -> Refusal:
    """The run's mapping does not fit its provider or cannot write in this database."""
    where = (
        f"spec.mapping.name: MigrationMapping {ref.name!r} in namespace {namespace!r}: "
        if ref is not None and ref.name is not None
        else ""
    )
    return Refusal("MappingInvalid", f"{where}{error}\nfix the mapping (or the database), {RETRY}")
