"""A run's provider and mapping at admission: the MigrationProvider and MigrationMapping it
names, read by name in the run's own namespace (never another's), checked, and handed to
admission, which snapshots them into the run for the workers (who read them from the database
and have no Kubernetes API rights). The decisions are ``reconcile.definitions``'."""

from __future__ import annotations

from ferryman_operator import crd
from ferryman_operator.kube import Kube
from ferryman_operator.reconcile import definitions
from ferryman_operator.reconcile.definitions import Resolved
from ferryman_operator.reconcile.status import Refusal
from ferryman_worker import contract


class Definitions:
    """Reads and checks the definitions a run names."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube

    async def resolve(self, run: contract.MigrationRun) -> Resolved | Refusal:
        """The run's provider definition and mapping, or why the run is refused. An API error
        other than "not found" or "forbidden" raises (the next refresh tries again)."""
        namespace = str(run.metadata.namespace)
        name = run.spec.source.provider
        try:
            found = await self._kube.custom_object(crd.PROVIDERS, namespace, name)
        except PermissionError:
            return _unreadable("ProviderUnreadable", crd.PROVIDERS, name, namespace)
        installed = found is None and contract.provider_installed(name)
        provider = definitions.provider_of(name, namespace, found, installed)
        if isinstance(provider, Refusal):
            return provider
        kinds = definitions.kinds_of(run, provider, found is not None)
        if kinds is not None:
            return kinds
        ref = run.spec.mapping
        mapped = None
        if ref is not None and ref.name is not None:
            try:
                mapped = await self._kube.custom_object(crd.MAPPINGS, namespace, ref.name)
            except PermissionError:
                return _unreadable("MappingUnreadable", crd.MAPPINGS, ref.name, namespace)
        mapping = definitions.mapping_of(ref, namespace, mapped)
        if isinstance(mapping, Refusal):
            return mapping
        return Resolved(provider, mapping)


def _unreadable(reason: str, plural: str, name: str, namespace: str) -> Refusal:
    kind = "Migration" + reason.removesuffix("Unreadable")
    return Refusal(
        reason,
        f"the operator may not read {kind} {name!r} in namespace {namespace!r}: install the "
        f"chart's operator RBAC (get on {plural}), {definitions.RETRY}",
    )
