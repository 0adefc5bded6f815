"""Tests that run the ``ferryman`` command: a MigrationRun file for the demo CRM, and the
command's environment."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from migration import SECRET

from ferryman_worker.engine.runtime import credential_env_var

RUN = """\
apiVersion: ferryman.dev/v1alpha1
kind: MigrationRun
metadata: {metadata}
spec:
  workspace: {workspace}
  source:
    provider: democrm
    baseURL: {url}
    credentialsSecretRef: {{name: democrm-token, key: token}}
  options: {{pageSize: {page_size}}}
"""


def run_yaml(
    url: str,
    *,
    name: str = "acme-crm",
    namespace: str | None = None,
    workspace: str = "acme",
    page_size: int = 100,
) -> str:
    """A MigrationRun of the demo CRM at ``url`` (without ``namespace``: ``ferryman run``'s
    default one)."""
    metadata = f"{{name: {name}" + (f", namespace: {namespace}}}" if namespace else "}")
    return RUN.format(metadata=metadata, workspace=workspace, url=url, page_size=page_size)


def run_file(folder: pathlib.Path, url: str, page_size: int = 100, workspace: str = "acme") -> str:
    """``folder``/run.yaml: MigrationRun default/acme-crm of the demo CRM at ``url``."""
    path = folder / "run.yaml"
    path.write_text(run_yaml(url, workspace=workspace, page_size=page_size))
    return str(path)


def command_env(api_key: str | None, **variables: str) -> dict[str, str]:
    """This process's environment without its FERRYMAN_ variables, with ``variables`` and, given
    ``api_key``, the run's credential (as ``ferryman run`` reads it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRYMAN_")}
    env.update(variables)
    if api_key:
        env[credential_env_var(SECRET["name"], SECRET["key"])] = api_key
    return env


def ferryman_run(
    path: pathlib.Path,
    provider_file: pathlib.Path,
    db_url: str,
    secret: str,
    token: str,
    exit_code: int = 0,
) -> str:
    """``ferryman run`` of the MigrationRun file ``path`` with the declarative provider
    ``provider_file``, its credential (Secret ``secret``, key token) ``token``; asserts that it
    exited with ``exit_code`` (0: the run succeeded) and returns what it printed."""
    env = command_env(
        None,
        FERRYMAN_DATABASE_URL=db_url,
        FERRYMAN_LANES="migrations:4",
        **{credential_env_var(secret, "token"): token},
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ferryman_worker.cli", "--log-level", "WARNING", "run", str(path),
         "--provider-file", str(provider_file)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == exit_code, proc.stdout + proc.stderr
    return proc.stdout
