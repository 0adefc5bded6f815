"""What the task jobs of one worker process share: source clients, rate-limit budgets and the
way to find a run's source credential. Built once by the process and handed to jobs as a resource.

A run admitted by the operator (its credential reference names the run's namespace) has its
credential sealed in the database (``ferryman_run_credentials``, see ``credentials``): the
worker opens it with the installation's sealing key and uses nothing else for it, whatever is
in its environment or folders. A run of ``ferryman run`` names a Secret found in the
environment or a mounted folder, bound to the host of the run's own ``baseURL`` (and to its
``credentialsSecretRef.tokenHost``, when it declares one).
"""

from __future__ import annotations

import os
import pathlib
import re
import threading
from collections.abc import Mapping
from typing import Any

import httpx

from ferryman_worker.db import connect
from ferryman_worker.db.connect import Connection
from ferryman_worker.destination_policy import Policy
from ferryman_worker.engine import auth
from ferryman_worker.engine.credentials import Credential, Sealer, local_file, url_host
from ferryman_worker.engine.paging import DEFAULT_MAX_PAGES
from ferryman_worker.engine.ratelimit import Budget, Budgets, credential_key
from ferryman_worker.engine.source import MAX_RESPONSE_BYTES, SourceClient
from ferryman_worker.errors import ConfigurationError, CredentialRefused, CredentialUnavailable
from ferryman_worker.providers import AuthStyle

RESOURCE = "engine"
"""The key of the EngineRuntime in a worker's job resources."""

SEALING_KEY_FILE = "/var/run/secrets/ferryman-sealing/key"


def credential_env_var(name: str, key: str) -> str:
    """``FERRYMAN_CREDENTIAL_<NAME>__<KEY>``, upper-cased; in each part ``-`` and ``.`` become
    ``_`` (the double underscore keeps ``a-b``/``c`` and ``a``/``b-c`` apart: a Secret's name
    has no ``_``)."""
    return (
        "FERRYMAN_CREDENTIAL_"
        + re.sub(r"[^A-Z0-9]", "_", name.upper())
        + "__"
        + re.sub(r"[^A-Z0-9_]", "_", key.upper())
    )


class EngineRuntime:
    """Per-process engine state; thread-safe."""

    def __init__(
        self,
        credentials_dir: str | None = None,
        source_timeout: float = 30.0,
        sync_windows: bool = False,
        sealing_key_file: str | None = None,
        database_url: str | None = None,
        local_credentials: bool = True,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        destinations: Policy | None = None,
        max_pages: int = DEFAULT_MAX_PAGES,
    ) -> None:
        self.destinations = destinations or Policy()
        """Where the installation lets mappings write: every writer is checked against it."""
        self.database_url = database_url
        """Where an OAuth2 refresh-token grant keeps its tokens (the run's database)."""
        self.credentials_dir = pathlib.Path(credentials_dir or "/var/run/secrets/ferryman")
        self.local_credentials = local_credentials
        """False on a worker serving the operator's runs: a credential comes only sealed."""
        self.source_timeout = source_timeout
        self.max_response_bytes = max_response_bytes
        self.max_pages = max_pages
        """Pages a listing chain may have when its kind declares no ``maxPages``."""
        self.sync_windows = sync_windows
        self.sealing_key_file = sealing_key_file or SEALING_KEY_FILE
        self.budgets = Budgets()
        self._clients: dict[tuple[str, str, AuthStyle | None], SourceClient] = {}
        self._sealer: Sealer | None = None
        self._lock = threading.Lock()

    def credential(self, run: Mapping[str, Any], style: AuthStyle | None = None) -> Credential:
        """The run's credential: unsealed from ``run["sealed_credential"]`` for a run the
        operator admitted (every key of its Secret), else (``ferryman run``) the keys the
        provider's auth ``style`` needs from the environment or the folder, bound to the host
        of the run's ``base_url`` and to its ``tokenHost``, if the reference declares one.
        ConfigurationError says where to put it, never what it is."""
        reference = run["credential"]
        if reference.get("namespace"):
            sealed = run.get("sealed_credential")
            if sealed is None:
                raise CredentialUnavailable(
                    f"run {run.get('name')!r}: its credential was not sealed at admission (an "
                    "operator admits a run only with its Secret sealed): retry the run"
                )
            return self._sealing().unseal(sealed)
        if not self.local_credentials:
            raise CredentialRefused(
                f"run {run.get('name')!r}: its credential reference names no namespace, and this"
                " worker takes a credential only sealed in the database at admission "
                "(FERRYMAN_LOCAL_CREDENTIALS is off, as on Kubernetes): admit the run through "
                "the operator, or run it with `ferryman run`"
            )
        if style is None:
            values = {"token": self._local(reference)}
        else:
            values = auth.credential_values(style, reference, self._local)
        login = reference.get("tokenHost")
        hosts = (url_host(run["base_url"]), *([login] if login else []))
        return Credential(values, hosts, local=True)

    def _local(self, reference: Mapping[str, str]) -> str:
        name, key = reference["name"], reference.get("key", "token")
        path = local_file(self.credentials_dir, name, key)
        variable = credential_env_var(name, key)
        if os.environ.get(variable):
            return os.environ[variable]
        if path.is_file():
            return path.read_text().strip()
        raise CredentialUnavailable(
            f"source credential Secret {name!r} key {key!r} is not available to this worker: "
            f"set {variable} or put it in the file {path}"
        )

    def _sealing(self) -> Sealer:
        with self._lock:
            if self._sealer is None:
                self._sealer = Sealer.from_file(self.sealing_key_file)
            return self._sealer

    def client(
        self, base_url: str, credential: Credential, style: AuthStyle | None = None
    ) -> SourceClient:
        """The source client of ``base_url`` with ``credential``, applied as the provider's auth
        ``style`` says (bearer when None), guarded by the credential's hosts. One per base URL,
        credential (its values and hosts) and style: two providers of one API that put the same
        credential on a request differently never share a client."""
        key = (base_url, credential.id, style)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = SourceClient(
                    base_url,
                    auth.for_credential(style, credential, base_url, self._connect)
                    if style
                    else auth.Bearer(credential.token),
                    self.source_timeout,
                    guard=credential.guard,
                    secrets=credential.secrets,
                    max_response_bytes=self.max_response_bytes,
                )
                self._observe_quota(client, credential_key(base_url, credential.id))
                self._clients[key] = client
            return client

    def _connect(self) -> Connection:
        """A connection of its own for an OAuth2 refresh (rare; autocommit)."""
        if self.database_url is None:
            raise ConfigurationError(
                "an OAuth2 refresh-token grant keeps its tokens in the run's database, and this"
                " process was given none"
            )
        return connect.connect(self.database_url)

    def _observe_quota(self, client: SourceClient, credential: str) -> None:
        """Every answer's rate-limit headers reach the credential's budget (ratelimit.quota)."""

        def observe(response: httpx.Response) -> None:
            self.budgets.observe(credential, response.headers)

        hooks = client.client.event_hooks
        client.client.event_hooks = {**hooks, "response": [*hooks["response"], observe]}

    def budget(
        self, base_url: str, credential: Credential, rate_limit: dict[str, float] | None
    ) -> Budget:
        limit = rate_limit or {}
        return self.budgets.get(
            credential_key(base_url, credential.id),
            limit.get("burst"),
            limit.get("tokens_per_second"),
        )

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
