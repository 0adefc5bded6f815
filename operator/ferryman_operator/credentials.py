"""A run's source credential at admission: the Secret the run names, read in the run's own
namespace (never another's), its ``ferryman.dev/hosts`` binding checked against the run's
``baseURL``, and its data sealed with the installation's key for the workers (who read it from
the database and have no Kubernetes API rights)."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable

from ferryman_operator.kube import Kube
from ferryman_operator.reconcile.status import Refusal
from ferryman_worker import contract

log = logging.getLogger("ferryman.operator.credentials")

RETRY = "then retry the run (annotate it ferryman.dev/retry=<any new value>)"


class Credentials:
    """Reads, checks and seals runs' credentials; the sealing key is read on first use."""

    def __init__(self, kube: Kube, sealing_key_file: str, protected: Iterable[str] = ()) -> None:
        self._kube = kube
        self._key_file = sealing_key_file
        self._protected = frozenset(protected)
        """The installation's own Secrets (``namespace/name``): never a run's credential."""
        self._sealer: contract.Sealer | None = None

    async def seal(
        self,
        run: contract.MigrationRun,
        token_url: str | None = None,
        allowed: tuple[str, ...] = (),
        keys: tuple[str, ...] = (),
    ) -> contract.Sealed | Refusal:
        """The run's credential sealed, or why the run is refused: its Secret must bind it to
        the run's baseURL and to ``token_url`` (its provider's OAuth2 token endpoint, if any),
        every host it is sent to. ``allowed`` (the installation's allowedSourceURLs) is sealed
        with it: the worker holds every request to it. ``keys``: the Secret's other keys the
        provider's auth reads (basic's username and password, an OAuth2 grant's), each
        required with a value. An API error other than "not found" or
        "forbidden" raises (the next refresh tries again)."""
        namespace = str(run.metadata.namespace)
        ref = run.spec.source.credentials_secret_ref
        where = f"Secret {ref.name!r} in namespace {namespace!r}"
        if f"{namespace}/{ref.name}" in self._protected:
            return Refusal(
                "CredentialForbidden",
                f"spec.source.credentialsSecretRef: {where} is one of the installation's own "
                "(its database URL or its sealing key), never a run's credential: name the "
                f"Secret of the source's credential, {RETRY}",
            )
        try:
            found = await self._kube.secret(namespace, ref.name)
        except PermissionError:
            return Refusal(
                "CredentialUnreadable",
                f"the operator may not read {where}: install the chart's operator RBAC "
                "(get on Secrets)",
            )
        if found is None:
            return Refusal(
                "CredentialMissing",
                f"spec.source.credentialsSecretRef: there is no {where} (a run uses only Secrets "
                f"of its own namespace): create it there, annotated {contract.HOSTS_ANNOTATION}="
                f"<the source's host>, {RETRY}",
            )
        data = {key: base64.b64decode(value).decode() for key, value in found["data"].items()}
        if ref.key not in data:
            return Refusal(
                "CredentialMissing",
                f"spec.source.credentialsSecretRef.key: {where} has no key {ref.key!r} (it has "
                f"{sorted(data)}): add it, or name one of those, {RETRY}",
            )
        lacking = [key for key in keys if not data.get(key)]
        if lacking:
            return Refusal("CredentialMissing", _lacking(where, lacking, run))
        hosts = contract.parse_hosts(found["annotations"].get(contract.HOSTS_ANNOTATION))
        credential = contract.Credential({**data, "token": data[ref.key]}, hosts, allowed=allowed)
        if not credential.allows(run.spec.source.base_url):
            return Refusal("CredentialNotBound", _unbound(where, hosts, run))
        if token_url is not None and not credential.allows(token_url):
            return Refusal("CredentialNotBound", _login_unbound(where, hosts, run, token_url))
        try:
            sealer = self._sealing()
        except contract.ConfigurationError as exc:
            return Refusal("AdmissionFailed", str(exc))
        return contract.Sealed(hosts, sealer.seal(credential))

    def _sealing(self) -> contract.Sealer:
        if self._sealer is None:
            self._sealer = contract.Sealer.from_file(self._key_file)
        return self._sealer


def _login_unbound(
    where: str, hosts: tuple[str, ...], run: contract.MigrationRun, token_url: str
) -> str:
    target = contract.url_host(token_url)
    bound = ", ".join(hosts)
    return (
        f"spec.auth.oauth2.tokenUrl of provider {run.spec.source.provider!r}: {target} is not a"
        f" host {where} is bound to ({contract.HOSTS_ANNOTATION}: {bound}), and the provider"
        f" sends the credential there to get its tokens: if that login host is the source's,"
        f" bind the Secret to it too (`kubectl annotate --overwrite secret"
        f" {run.spec.source.credentials_secret_ref.name} -n {run.metadata.namespace}"
        f" {contract.HOSTS_ANNOTATION}={bound},{target}`), else correct the provider's tokenUrl,"
        f" {RETRY}"
    )


def _unbound(where: str, hosts: tuple[str, ...], run: contract.MigrationRun) -> str:
    target = contract.url_host(run.spec.source.base_url)
    if not hosts:
        return (
            f"{where} is bound to no host: annotate it {contract.HOSTS_ANNOTATION} with the "
            f"hosts its credential may be sent to (e.g. `kubectl annotate secret "
            f"{run.spec.source.credentials_secret_ref.name} -n {run.metadata.namespace} "
            f"{contract.HOSTS_ANNOTATION}={target}`), {RETRY}"
        )
    return (
        f"spec.source.baseURL: {target} is not a host {where} is bound to ("
        f"{contract.HOSTS_ANNOTATION}: {', '.join(hosts)}): its credential is never sent "
        f"elsewhere; point baseURL at one of them, {RETRY}"
    )


def _lacking(where: str, keys: list[str], run: contract.MigrationRun) -> str:
    return (
        f"spec.source.credentialsSecretRef: {where} has no value for {keys}, which the auth of"
        f" provider {run.spec.source.provider!r} reads (spec.auth of the provider: basic reads"
        f" username and password, oauth2 the keys of spec.auth.oauth2.keys): add them to the"
        f" Secret, {RETRY}"
    )
