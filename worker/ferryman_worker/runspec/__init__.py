"""The MigrationRun resource: what a user asks for, as one tree of pydantic models.

This module owns the shape of a MigrationRun (``apiVersion: ferryman.dev/v1alpha1``): its spec, its
status, the rules a spec must follow, and the one translation of validation errors into messages a
user can act on (``spec.options.windowSize: must be at most 60 (a refused window ...); got
1000``). The same models serve ``ferryman run run.yaml`` (no Kubernetes), the operator, and the
generation of the CRD in ``crds/``, so a file one of them accepts the others accept too: YAML keys
are camelCase only, unknown keys are errors, every field carries its description.

It must not do I/O beyond reading the YAML file it is handed: no database, no Kubernetes client, no
network, no provider look-up (whether a provider has the kinds asked for is checked where providers
are loaded). Credentials are never part of a run: a spec names the Secret that holds them, and no
message or exception this module produces carries a value that could be one.
"""

from ferryman_worker.runspec.explain import explain
from ferryman_worker.runspec.loading import load_run, load_run_file, parse_run
from ferryman_worker.runspec.models import (
    API_VERSION,
    INLINE_CREDENTIALS,
    KIND,
    RETRY_ANNOTATION,
    SECRET_ADVICE,
    VERIFY_ANNOTATION,
    Condition,
    ConflictPolicy,
    KindVerdictStatus,
    KindVerification,
    MigrationRun,
    MigrationRunSpec,
    MigrationRunStatus,
    ObjectMeta,
    PhaseEta,
    RateLimitSpec,
    RunEta,
    RunMode,
    RunOptions,
    RunState,
    RunVerification,
    SecretKeyRef,
    SourceSpec,
)

__all__ = [
    "API_VERSION",
    "INLINE_CREDENTIALS",
    "KIND",
    "RETRY_ANNOTATION",
    "SECRET_ADVICE",
    "VERIFY_ANNOTATION",
    "Condition",
    "ConflictPolicy",
    "KindVerdictStatus",
    "KindVerification",
    "MigrationRun",
    "MigrationRunSpec",
    "MigrationRunStatus",
    "ObjectMeta",
    "PhaseEta",
    "RateLimitSpec",
    "RunEta",
    "RunMode",
    "RunOptions",
    "RunState",
    "RunVerification",
    "SecretKeyRef",
    "SourceSpec",
    "explain",
    "load_run",
    "load_run_file",
    "parse_run",
]
