"""Which refused runs a MigrationProvider or MigrationMapping wakes: a run refused because the
provider or the mapping it names did not exist or did not fit (the provider lacking a kind the
run names, too) is examined again when either of them is created or changed in its namespace,
and admitted once they do, without being re-created or retried by hand. No Kubernetes here: the
handlers ask ``awaited`` of every run (kopf's ``awaiting`` index) and look up the resource that
changed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ferryman_operator import crd
from ferryman_operator.reconcile import conditions

REASONS: Final = frozenset(
    {"ProviderNotFound", "ProviderInvalid", "KindsInvalid", "MappingNotFound", "MappingInvalid"}
)
"""The refusals a change of the run's provider or mapping may mend (KindsInvalid: a kind of
``spec.kinds`` its MigrationProvider did not have). (A mapping refused by the
database's catalog is MappingInvalid too: a new table needs the retry annotation, since nothing
here sees the database change.)"""

Named = tuple[str, str, str]
"""A namespaced resource: (plural, namespace, name)."""


def awaited(body: Mapping[str, Any]) -> list[Named]:
    """The MigrationProvider and MigrationMapping the run ``body`` names, when it is refused for
    one of them (its Admitted condition False for a reason of ``REASONS``) and not being deleted;
    nothing otherwise. Both, whichever was refused: a mapping that does not fit its provider may
    be mended on either side, and a run refused for its provider may be refused for its mapping
    next."""
    meta, spec = body.get("metadata") or {}, body.get("spec") or {}
    status = body.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("state") != "Failed":
        return []
    admitted = conditions.find(status.get("conditions") or [], conditions.ADMITTED) or {}
    if admitted.get("status") != "False" or admitted.get("reason") not in REASONS:
        return []
    namespace = str(meta.get("namespace"))
    named: list[Named] = []
    provider = (spec.get("source") or {}).get("provider")
    if provider:
        named.append((crd.PROVIDERS, namespace, str(provider)))
    mapping = (spec.get("mapping") or {}).get("name")
    if mapping:
        named.append((crd.MAPPINGS, namespace, str(mapping)))
    return named


def wakes(event_type: str | None) -> bool:
    """Whether a watch event of a provider or mapping (``None``: listed when the operator
    started) may mend the runs that await it: all but its deletion."""
    return event_type != "DELETED"
