"""The operator's configuration: one model, read once from the environment (prefix
``FERRYMAN_OPERATOR_``, and ``FERRYMAN_DATABASE_URL`` for the database) and the command line.
Nothing else reads the environment. The database URL is a ``SecretStr``: never printed or logged.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ferryman_operator.errors import SettingsError
from ferryman_operator.reconcile import allowlist
from ferryman_worker import contract

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _own_namespace() -> str:
    """The pod's namespace (from its service-account mount), else ``default``."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


class OperatorSettings(BaseSettings):
    """Settings of ``ferryman operator``; each field is also ``FERRYMAN_OPERATOR_<FIELD>``."""

    model_config = SettingsConfigDict(
        env_prefix="FERRYMAN_OPERATOR_", extra="ignore", use_attribute_docstrings=True
    )

    database_url: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("database_url", "FERRYMAN_DATABASE_URL"),
    )
    """PostgreSQL URL (``FERRYMAN_DATABASE_URL``): the database the workers use."""

    sealing_key_file: str = Field(
        default="/var/run/secrets/ferryman-sealing/key",
        validation_alias=AliasChoices("sealing_key_file", "FERRYMAN_SEALING_KEY_FILE"),
    )
    """File holding the installation's Fernet key (``FERRYMAN_SEALING_KEY_FILE``, the workers'
    too): each run's credential is sealed with it at admission."""

    namespaces: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Namespaces whose MigrationRuns this operator handles (comma-separated in the environment);
    empty: every namespace."""

    liveness_port: int | None = Field(default=None, ge=1, le=65535)
    """Port of the liveness endpoint ``/healthz``; None: no endpoint."""

    metrics_port: int = Field(default=0, ge=0, le=65535)
    """Port of ``GET /metrics`` (Prometheus's text format) on every address; 0 = off."""

    status_interval: float = Field(default=5.0, gt=0)
    """Seconds between two status refreshes of a live run (and admission tries of a queued
    one)."""

    lease_name: str = "ferryman-operator"
    """The coordination.k8s.io Lease whose holder is the one operator that acts."""

    lease_namespace: str = Field(default_factory=_own_namespace)
    """Namespace of the Lease; default: the pod's own namespace, else ``default``."""

    lease_duration: float = Field(default=15.0, ge=1)
    """Seconds a Lease stays the holder's without renewal; a killed leader's successor acts
    after at most this long."""

    identity: str = Field(default_factory=_identity)
    """This process's name in the Lease (host name and process id)."""

    pool_namespace: str | None = None
    """Namespace of the pool spec and the worker Deployment; default: the Lease's namespace
    (the operator's own, where the chart installs them)."""

    pool_interval: float = Field(default=10.0, gt=0)
    """Seconds between two checks of the pool spec against the worker Deployment and the
    database's connection budget."""

    db_connections: int = Field(default=2, ge=1)
    """Database connections the operator holds at most (the pool spec's operatorConnections)."""

    default_lane_width: int = Field(default=4, ge=1)
    """Width of the migrations lane assumed when no pool spec is found (sets maxInFlight)."""

    allowed_source_urls: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Base-URL patterns a run may read from (comma-separated in the environment), e.g.
    ``https://*.example.com``: a run whose ``spec.source.baseURL``, or whose provider's OAuth2
    token URL, matches none is refused at admission (``SourceNotAllowed``); empty: any URL
    (docs/security.md)."""

    protected_secrets: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """The installation's own Secrets as ``namespace/name`` (comma-separated in the
    environment): the database URLs and the sealing key. A run whose credential reference
    names one is refused (``CredentialForbidden``) before anything is read; the chart sets
    them."""

    destination_schemas: Annotated[list[contract.DestinationSchema], NoDecode] = Field(
        default=["public"]
    )
    """Schemas whose tables mappings may write (comma-separated); ferryman's own tables and
    PostgreSQL's schemas never. Checked at admission; the workers check it again (give them
    the same: the chart's ``destinations``)."""

    destination_tables: Annotated[list[contract.DestinationTable], NoDecode] = Field(
        default_factory=list
    )
    """Tables (``schema.table``, comma-separated) mappings may write besides those of
    ``destination_schemas``."""

    destination_unscoped: bool = False
    """Let mappings write tables without a workspace column: single-tenant installations
    only (docs/security.md)."""

    @field_validator("namespaces", "allowed_source_urls", "protected_secrets", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("allowed_source_urls")
    @classmethod
    def _check_patterns(cls, value: list[str]) -> list[str]:
        allowlist.parse(value)  # ValueError naming the pattern
        return value

    @field_validator("destination_schemas", "destination_tables", mode="before")
    @classmethod
    def _split_names(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @property
    def destinations(self) -> contract.DestinationPolicy:
        """Where this installation's mappings may write."""
        return contract.DestinationPolicy(
            schemas=tuple(self.destination_schemas),
            tables=tuple(self.destination_tables),
            unscoped=self.destination_unscoped,
        )

    @property
    def renew_interval(self) -> float:
        """Seconds between Lease renewals: a third of its duration."""
        return self.lease_duration / 3

    @property
    def request_timeout(self) -> float:
        """Seconds any Kubernetes request of the operator may take: a third of the Lease's
        duration, the margin between a leader's deadline to renew and the earliest moment a
        standby may take the Lease (so no request of the old leader outlives its lead)."""
        return self.lease_duration / 3


def load(**overrides: object) -> OperatorSettings:
    """Settings from the environment and ``overrides`` (None = not given); SettingsError names
    the field and its variable."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return OperatorSettings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for error in exc.errors(include_url=False, include_input=False):
            field = ".".join(str(part) for part in error["loc"]) or "settings"
            lines.append(f"{field} (FERRYMAN_OPERATOR_{field.upper()}): {error['msg']}")
        raise SettingsError("invalid operator settings: " + "; ".join(lines)) from None
