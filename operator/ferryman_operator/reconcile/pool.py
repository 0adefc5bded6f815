"""Sizing the worker Deployment from the pool spec (the ConfigMap labelled
``ferryman.dev/pool-spec``) against the database's connection budget.

The rules a worker's pool must follow are the worker's own (``contract.worker_pool_size`` and
``contract.migrations_width``, which ``ferryman worker`` enforces at start-up: a pool size derived
from the lanes' threads, or the threads of a lane written without a width derived from the pool
size): restated nowhere here. The lanes string is written into the Deployment as given (the
chart's hash is over it), with the resolved pool size. What is added is the budget:
replicas x pool size + the operator's, the reaper's and some headroom connections must fit
``max_connections`` minus the connections the database reserves.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any, Final

from ferryman_operator.errors import PoolSpecError
from ferryman_operator.reconcile import conditions as cond
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_worker import contract

POOL_SPEC_LABEL: Final = "ferryman.dev/pool-spec"
WORKERS_LABEL: Final = "ferryman.dev/workers"
HASH_ANNOTATION: Final = "ferryman.dev/pool-spec-hash"
CONTAINER: Final = "worker"


@dataclasses.dataclass(frozen=True)
class PoolSpec:
    """The ConfigMap's data, parsed."""

    lanes: str
    replicas: int
    pool_size: int | None = None
    operator_connections: int = 2
    reaper_connections: int = 2
    headroom_connections: int = 2

    @property
    def extra(self) -> int:
        return self.operator_connections + self.reaper_connections + self.headroom_connections


@dataclasses.dataclass(frozen=True)
class Sizing:
    """The verdict on a pool spec: what to write into the Deployment, or why nothing."""

    spec: PoolSpec | None
    pool_size: int | None
    migrations_width: int | None
    fits: bool
    reason: str
    message: str

    @property
    def condition(self) -> Wanted:
        """The WorkersReady condition every live run shows."""
        return Wanted(
            cond.WORKERS_READY, "True" if self.fits else "False", self.reason, self.message
        )


def parse(data: Mapping[str, str] | None) -> PoolSpec:
    """The pool spec from a ConfigMap's data; PoolSpecError names the key and the fix."""
    data = data or {}
    lanes = (data.get("lanes") or "").strip()
    if not lanes:
        raise PoolSpecError(
            "lanes is missing: give the worker's lanes, e.g. migrations:4,default:3"
        )
    return PoolSpec(
        lanes=lanes,
        replicas=_int(data, "replicas", None, minimum=0),
        pool_size=_int(data, "poolSize", "", minimum=1)
        if (data.get("poolSize") or "").strip()
        else None,
        operator_connections=_int(data, "operatorConnections", "2", minimum=0),
        reaper_connections=_int(data, "reaperConnections", "2", minimum=0),
        headroom_connections=_int(data, "headroomConnections", "2", minimum=0),
    )


def _int(data: Mapping[str, str], key: str, default: str | None, minimum: int) -> int:
    text = (data.get(key) or "").strip() or default
    if text is None:
        raise PoolSpecError(f'{key} is missing: give a whole number, e.g. {key}: "2"')
    try:
        value = int(text)
    except ValueError:
        raise PoolSpecError(f"{key} is {text!r}, not a whole number") from None
    if value < minimum:
        raise PoolSpecError(f"{key} is {value}; it must be at least {minimum}")
    return value


def size(spec: PoolSpec, budget: contract.ConnectionBudget) -> Sizing:
    """Resolve the pool size (the worker's rule) and check the connection budget."""
    try:
        pool_size = contract.worker_pool_size(spec.lanes, spec.pool_size)
    except contract.ConfigurationError as exc:
        return Sizing(spec, None, None, False, "InvalidPoolSpec", str(exc))
    width = contract.migrations_width(spec.lanes, pool_size)
    total = spec.replicas * pool_size + spec.extra
    reserved = budget.max_connections - budget.available
    arithmetic = (
        f"{spec.replicas} replicas x {pool_size} connections + {spec.extra} (operator "
        f"{spec.operator_connections}, reaper {spec.reaper_connections}, headroom "
        f"{spec.headroom_connections}) = {total}"
    )
    leaves = (
        f"{budget.available} that max_connections {budget.max_connections} - {reserved} "
        "reserved leaves"
    )
    if total > budget.available:
        return Sizing(
            spec,
            pool_size,
            width,
            False,
            "OverConnectionBudget",
            f"{arithmetic} exceed the {leaves}: lower replicas, lanes or poolSize, or raise "
            "max_connections; the worker Deployment was left as it was",
        )
    return Sizing(spec, pool_size, width, True, "PoolSpecApplied", f"{arithmetic} fit the {leaves}")


def spec_hash(lanes: str, pool_size: int) -> str:
    """The pod-template annotation that rolls the pods when lanes or pool size change; helm
    computes the same (sha256sum of the same text)."""
    return hashlib.sha256(f"lanes={lanes};poolSize={pool_size}".encode()).hexdigest()[:16]


def deployment_patch(deployment: Mapping[str, Any], sizing: Sizing) -> dict[str, Any] | None:
    """A strategic-merge patch that makes the Deployment match ``sizing``, or None when it
    matches already (so nothing rolls, and nothing flaps)."""
    if not sizing.fits or sizing.spec is None or sizing.pool_size is None:
        return None
    spec = deployment.get("spec") or {}
    template = spec.get("template") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    containers = (template.get("spec") or {}).get("containers") or []
    container: Mapping[str, Any] = next((c for c in containers if c.get("name") == CONTAINER), {})
    env = {e.get("name"): e.get("value") for e in container.get("env") or []}
    want_env = {"FERRYMAN_LANES": sizing.spec.lanes, "FERRYMAN_POOL_SIZE": str(sizing.pool_size)}
    want_hash = spec_hash(sizing.spec.lanes, sizing.pool_size)
    patch: dict[str, Any] = {}
    if spec.get("replicas") != sizing.spec.replicas:
        patch["replicas"] = sizing.spec.replicas
    if annotations.get(HASH_ANNOTATION) != want_hash:
        patch.setdefault("template", {})["metadata"] = {"annotations": {HASH_ANNOTATION: want_hash}}
    changed = [{"name": k, "value": v} for k, v in want_env.items() if env.get(k) != v]
    if changed:
        patch.setdefault("template", {})["spec"] = {
            "containers": [{"name": CONTAINER, "env": changed}]
        }
    return {"spec": patch} if patch else None


def missing(reason: str, message: str) -> Sizing:
    """A verdict without a usable pool spec (none found, or malformed)."""
    return Sizing(None, None, None, False, reason, message)


NO_POOL_SPEC: Final = Wanted(
    cond.WORKERS_READY,
    "Unknown",
    "NoPoolSpec",
    f"no ConfigMap labelled {POOL_SPEC_LABEL} was found: the operator does not size the "
    "workers, and runs assume a migrations lane of the default width",
)
