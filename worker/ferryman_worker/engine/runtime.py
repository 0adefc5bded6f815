"""What the task jobs of one worker process share: source clients, rate-limit budgets and the
way to find a source credential. Built once by the process and handed to jobs as a resource.

Credentials come from the environment or from mounted Secret files, never from the database or
a run's spec: a run only names its Secret (``{"name": ..., "key": ...}``).
"""

from __future__ import annotations

import os
import pathlib
import re
import threading

import httpx

from ferryman_worker.engine.ratelimit import Budget, Budgets, credential_key
from ferryman_worker.engine.source import SourceClient
from ferryman_worker.errors import ConfigurationError

RESOURCE = "engine"
"""The key of the EngineRuntime in a worker's job resources."""


def credential_env_var(name: str, key: str) -> str:
    """``FERRYMAN_CREDENTIAL_<NAME>_<KEY>``, upper-cased, other characters as underscores."""
    return "FERRYMAN_CREDENTIAL_" + re.sub(r"[^A-Z0-9]", "_", f"{name}_{key}".upper())


class EngineRuntime:
    """Per-process engine state; thread-safe."""

    def __init__(
        self,
        credentials_dir: str | None = None,
        source_timeout: float = 30.0,
        sync_windows: bool = False,
    ) -> None:
        self.credentials_dir = pathlib.Path(credentials_dir or "/var/run/secrets/ferryman")
        self.source_timeout = source_timeout
        self.sync_windows = sync_windows
        self.budgets = Budgets()
        self._clients: dict[tuple[str, str], SourceClient] = {}
        self._lock = threading.Lock()

    def token(self, credential: dict[str, str]) -> str:
        """The secret a run's credential reference names; ConfigurationError says where to
        put it (never what it is)."""
        name, key = credential["name"], credential.get("key", "token")
        variable = credential_env_var(name, key)
        if os.environ.get(variable):
            return os.environ[variable]
        path = self.credentials_dir / name / key
        if path.is_file():
            return path.read_text().strip()
        raise ConfigurationError(
            f"source credential Secret {name!r} key {key!r} is not available to this worker: "
            f"set {variable} or mount the Secret at {path}"
        )

    def client(self, base_url: str, token: str) -> SourceClient:
        with self._lock:
            client = self._clients.get((base_url, token))
            if client is None:
                client = SourceClient(base_url, token, self.source_timeout)
                self._observe_quota(client, credential_key(base_url, token))
                self._clients[(base_url, token)] = client
            return client

    def _observe_quota(self, client: SourceClient, credential: str) -> None:
        """Every answer's rate-limit headers reach the credential's budget (ratelimit.quota)."""

        def observe(response: httpx.Response) -> None:
            self.budgets.observe(credential, response.headers)

        hooks = client.client.event_hooks
        client.client.event_hooks = {**hooks, "response": [*hooks["response"], observe]}

    def budget(self, base_url: str, token: str, rate_limit: dict[str, float] | None) -> Budget:
        limit = rate_limit or {}
        return self.budgets.get(
            credential_key(base_url, token), limit.get("burst"), limit.get("tokens_per_second")
        )

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
