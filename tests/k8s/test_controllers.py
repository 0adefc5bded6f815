"""kube-controller-manager runs the controllers the operator relies on.

The pods made here select a node that does not exist, so they stay Pending (and no image is ever
pulled) whether or not the session has added a node (`node` fixture) before these tests run."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.k8s

NOWHERE = {"ferryman.dev/test-node": "none"}  # a nodeSelector no node matches

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "nodeSelector": NOWHERE,
                "containers": [{"name": "web", "image": "registry.example/web:1"}],
            },
        },
    },
}

CRONJOB = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {"name": "tick"},
    "spec": {
        "schedule": "* * * * *",
        "jobTemplate": {
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": NOWHERE,
                        "containers": [{"name": "tick", "image": "registry.example/tick:1"}],
                    }
                }
            }
        },
    },
}


def items(controlplane: Any, kind: str, namespace: str) -> list[dict[str, Any]]:
    return list(controlplane.kubectl_json("get", kind, "-n", namespace)["items"])


def owned_by(objects: list[dict[str, Any]], owner: dict[str, Any]) -> list[dict[str, Any]]:
    def owners(o: dict[str, Any]) -> set[str]:
        return {ref["uid"] for ref in o["metadata"].get("ownerReferences", [])}

    return [o for o in objects if owner["metadata"]["uid"] in owners(o)]


def test_a_new_namespace_gets_its_default_service_account_and_root_ca(
    controlplane: Any, namespace: str, wait_for: Any
):
    names = lambda kind: {o["metadata"]["name"] for o in items(controlplane, kind, namespace)}  # noqa: E731
    wait_for(lambda: "default" in names("serviceaccounts"))
    wait_for(lambda: "kube-root-ca.crt" in names("configmaps"))
    ca = controlplane.kubectl_json("get", "configmap", "kube-root-ca.crt", "-n", namespace)
    assert ca["data"]["ca.crt"] == (controlplane.state_dir / "pki" / "ca.crt").read_text()


def test_a_deployment_gets_a_replicaset_and_pending_pods_that_the_gc_removes(
    controlplane: Any, namespace: str, wait_for: Any
):
    controlplane.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(DEPLOYMENT))
    deployment = controlplane.kubectl_json("get", "deployment", "web", "-n", namespace)

    replicasets = lambda: owned_by(items(controlplane, "replicasets", namespace), deployment)  # noqa: E731
    [replicaset] = wait_for(replicasets)
    wait_for(lambda: len(owned_by(items(controlplane, "pods", namespace), replicaset)) == 2)
    for pod in items(controlplane, "pods", namespace):
        assert pod["status"]["phase"] == "Pending"  # no node it may run on
        assert "nodeName" not in pod["spec"]

    controlplane.kubectl("delete", "deployment", "web", "-n", namespace)
    wait_for(lambda: not items(controlplane, "replicasets", namespace), timeout=60)
    wait_for(lambda: not items(controlplane, "pods", namespace), timeout=60)


def test_deleting_a_namespace_removes_it_and_its_contents(controlplane: Any, wait_for: Any):
    controlplane.kubectl("create", "namespace", "doomed")
    controlplane.kubectl("create", "configmap", "c", "-n", "doomed", "--from-literal=k=v")
    controlplane.kubectl("delete", "namespace", "doomed", "--wait=false")

    def gone() -> bool:
        result = controlplane.kubectl("get", "namespace", "doomed", check=False)
        return result.returncode != 0 and "NotFound" in result.stderr

    wait_for(gone, timeout=60)


@pytest.mark.slow
def test_a_cronjob_creates_a_job_on_schedule(controlplane: Any, namespace: str, wait_for: Any):
    controlplane.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(CRONJOB))
    cronjob = controlplane.kubectl_json("get", "cronjob", "tick", "-n", namespace)
    [job] = wait_for(lambda: owned_by(items(controlplane, "jobs", namespace), cronjob), timeout=90)
    assert job["metadata"]["name"].startswith("tick-")
    # The job controller made its pod (which stays Pending).
    wait_for(lambda: owned_by(items(controlplane, "pods", namespace), job))
