"""helm installs, upgrades and uninstalls a chart on the real API server.

(`helm install --wait` and `helm test` need running pods, which this control plane cannot have.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.k8s

CHART = Path(__file__).parent / "charts" / "tiny"


def exists(controlplane: Any, namespace: str, kind: str, name: str) -> bool:
    result = controlplane.kubectl("get", kind, name, "-n", namespace, check=False)
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
    return result.returncode == 0


def test_helm_lints_and_renders_the_chart(controlplane: Any):
    assert "0 chart(s) failed" in controlplane.helm("lint", str(CHART)).stdout
    rendered = controlplane.helm("template", "demo", str(CHART), "--set", "greeting=hi").stdout
    assert "name: demo-settings" in rendered and 'greeting: "hi"' in rendered


def test_helm_install_upgrade_and_uninstall(controlplane: Any, namespace: str, wait_for: Any):
    helm = controlplane.helm
    helm("install", "demo", str(CHART), "-n", namespace, "--set", "greeting=hi")

    [release] = json.loads(helm("list", "-n", namespace, "-o", "json").stdout)
    assert release["name"] == "demo" and release["chart"] == "tiny-0.1.0"
    assert release["status"] == "deployed"
    settings = controlplane.kubectl_json("get", "configmap", "demo-settings", "-n", namespace)
    assert settings["data"] == {"greeting": "hi"}
    assert settings["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert settings["metadata"]["annotations"]["meta.helm.sh/release-name"] == "demo"
    assert exists(controlplane, namespace, "serviceaccount", "demo-app")
    deployment = controlplane.kubectl_json("get", "deployment", "demo-app", "-n", namespace)
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "demo-app"

    helm("upgrade", "demo", str(CHART), "-n", namespace, "--set", "greeting=bye")
    [release] = json.loads(helm("list", "-n", namespace, "-o", "json").stdout)
    assert release["revision"] == "2"
    settings = controlplane.kubectl_json("get", "configmap", "demo-settings", "-n", namespace)
    assert settings["data"] == {"greeting": "bye"}
    assert json.loads(helm("get", "values", "demo", "-n", namespace, "-o", "json").stdout) == {
        "greeting": "bye"
    }

    helm("uninstall", "demo", "-n", namespace)
    assert json.loads(helm("list", "-n", namespace, "-o", "json").stdout) == []
    for kind, name in [
        ("configmap", "demo-settings"),
        ("serviceaccount", "demo-app"),
        ("deployment", "demo-app"),
    ]:
        wait_for(lambda kind=kind, name=name: not exists(controlplane, namespace, kind, name))
    # The Deployment's ReplicaSet goes too: the garbage collector follows its ownerReference.
    wait_for(lambda: not controlplane.kubectl_json("get", "replicasets", "-n", namespace)["items"])
