"""The chart's operator RBAC (templates/operator-rbac.yaml) grants what the operator needs and
nothing more: runs in every namespace, providers and mappings read and watched but never written,
the Lease, pool spec and worker Deployment in its own namespace only (the worker Deployment by
name), and Secrets by name only (get: the one a run
names, read in the run's namespace at admission; never list or watch). (That it is enough is
what test_operator.py shows: every operator there runs under exactly this RBAC.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.k8s import operator_bench

pytestmark = pytest.mark.k8s


@pytest.fixture(scope="module")
def release(controlplane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    operator_bench.install_crd(controlplane)
    namespace = f"rbac-{uuid.uuid4().hex[:6]}"
    controlplane.kubectl("create", "namespace", namespace)
    operator_bench.install_operator_rbac(controlplane, namespace, tmp_path_factory.mktemp("rbac"))
    yield namespace
    controlplane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.mark.parametrize(
    ("verb", "resource", "where", "allowed"),
    [
        ("watch", "migrationruns.ferryman.dev", "--all-namespaces", True),
        ("patch", "migrationruns.ferryman.dev/status", "-n=elsewhere", True),
        ("delete", "migrationruns.ferryman.dev", "-n=elsewhere", True),
        ("create", "migrationruns.ferryman.dev", "-n=elsewhere", False),
        ("create", "events", "-n=elsewhere", True),
        ("update", "leases/ferryman-operator", "-n=RELEASE", True),
        ("update", "leases/someone-elses", "-n=RELEASE", False),
        ("create", "leases", "-n=elsewhere", False),
        ("list", "configmaps", "-n=RELEASE", True),
        ("list", "configmaps", "-n=elsewhere", False),
        ("patch", "deployments.apps/ferryman-worker", "-n=RELEASE", True),
        ("patch", "deployments.apps/someone-elses", "-n=RELEASE", False),
        ("patch", "deployments.apps/ferryman-worker", "-n=elsewhere", False),
        ("list", "deployments.apps", "-n=RELEASE", True),
        ("get", "migrationproviders.ferryman.dev", "-n=elsewhere", True),
        ("get", "migrationmappings.ferryman.dev", "-n=elsewhere", True),
        ("list", "migrationproviders.ferryman.dev", "--all-namespaces", True),
        ("watch", "migrationmappings.ferryman.dev", "-n=elsewhere", True),
        ("create", "migrationmappings.ferryman.dev", "-n=elsewhere", False),
        ("patch", "migrationproviders.ferryman.dev", "-n=elsewhere", False),
        ("delete", "migrationmappings.ferryman.dev", "-n=elsewhere", False),
        ("get", "secrets", "-n=elsewhere", True),
        ("list", "secrets", "--all-namespaces", False),
        ("list", "secrets", "-n=elsewhere", False),
        ("watch", "secrets", "-n=elsewhere", False),
        ("create", "secrets", "-n=RELEASE", False),
        ("list", "customresourcedefinitions.apiextensions.k8s.io", "", False),
    ],
)
def test_the_operator_may_do_only_what_it_needs(
    controlplane: Any, release: str, verb: str, resource: str, where: str, allowed: bool
) -> None:
    subject = f"system:serviceaccount:{release}:{operator_bench.SERVICE_ACCOUNT}"
    scope = [where.replace("RELEASE", release)] if where else []
    answer = controlplane.kubectl(
        "auth", "can-i", verb, resource, *scope, "--as", subject, check=False
    )
    assert answer.stdout.strip() == ("yes" if allowed else "no"), answer.stderr


def test_every_rule_says_why(tmp_path: Path) -> None:
    text = (operator_bench.CHART / "templates" / "operator-rbac.yaml").read_text()
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if line.strip().startswith("- apiGroups:"):
            assert lines[number - 1].strip().startswith("#"), (
                f"rule at line {number + 1} has no comment"
            )


@pytest.fixture(scope="module")
def confined(controlplane: Any) -> Iterator[tuple[str, str]]:
    """The chart's operator RBAC with operator.secretNamespaces = [a tenant's namespace] (its
    own release name, so its cluster-wide objects are its own): the release's and the tenant's
    namespaces."""
    suffix = uuid.uuid4().hex[:6]
    release, tenant = f"guarded-{suffix}", f"tenant-{suffix}"
    for namespace in (release, tenant):
        controlplane.kubectl("create", "namespace", namespace)
    rendered = controlplane.helm(
        "template", "guarded", str(operator_bench.CHART), "--namespace", release,
        "--show-only", "templates/operator-rbac.yaml",
        "--set", f"operator.secretNamespaces={{{tenant}}}",
    ).stdout  # fmt: skip
    controlplane.kubectl("apply", "-f", "-", input=rendered)
    controlplane.kubectl("create", "serviceaccount", "guarded-ferryman-operator", "-n", release)
    yield release, tenant
    controlplane.kubectl("delete", "-f", "-", "--wait=false", input=rendered, check=False)
    for namespace in (release, tenant):
        controlplane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.mark.parametrize(
    ("resource", "where", "allowed"),
    [
        ("secrets/democrm-token", "TENANT", True),
        ("secrets/ferryman-database", "RELEASE", False),
        ("secrets/guarded-ferryman-sealing-key", "RELEASE", False),
        ("secrets/democrm-token", "elsewhere", False),
    ],
)
def test_listed_secret_namespaces_confine_the_operators_secret_reads_to_them(
    controlplane: Any, confined: tuple[str, str], resource: str, where: str, allowed: bool
) -> None:
    release, tenant = confined
    subject = f"system:serviceaccount:{release}:guarded-ferryman-operator"
    namespace = {"TENANT": tenant, "RELEASE": release}.get(where, where)
    answer = controlplane.kubectl(
        "auth", "can-i", "get", resource, "-n", namespace, "--as", subject, check=False
    )
    assert answer.stdout.strip() == ("yes" if allowed else "no"), answer.stderr


def test_by_default_the_grant_is_cluster_wide_and_covers_the_release_namespace(
    controlplane: Any, release: str
) -> None:
    """What RBAC cannot subtract, and why the operator refuses a run naming the installation's
    own Secrets (test_operator_tenancy)."""
    subject = f"system:serviceaccount:{release}:{operator_bench.SERVICE_ACCOUNT}"
    answer = controlplane.kubectl(
        "auth", "can-i", "get", "secrets/ferryman-database", "-n", release, "--as", subject,
        check=False,
    )  # fmt: skip
    assert answer.stdout.strip() == "yes"
