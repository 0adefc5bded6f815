"""RBAC is enforced, and service-account tokens come from the TokenRequest API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.k8s

ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: configmap-reader}
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: robot-reads-configmaps}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: configmap-reader}
subjects:
  - {kind: ServiceAccount, name: robot}
"""


@pytest.fixture
def robot(controlplane: Any, namespace: str) -> str:
    controlplane.kubectl("create", "serviceaccount", "robot", "-n", namespace)
    controlplane.kubectl("create", "configmap", "settings", "-n", namespace, "--from-literal=a=1")
    return f"system:serviceaccount:{namespace}:robot"


def token_kubeconfig(controlplane: Any, token: str, path: Path) -> Path:
    """A kubeconfig with the server and CA of the admin one, and only a bearer token."""
    admin = json.loads(controlplane.kubeconfig.read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": "robot", "user": {"token": token}}],
        "contexts": [{"name": "robot", "context": {"cluster": "ferryman", "user": "robot"}}],
        "current-context": "robot",
    }
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def token_client(controlplane: Any, api_client: Any, namespace: str, robot: str) -> Iterator[Any]:
    """A Python client that authenticates with a TokenRequest token of `robot`."""
    from kubernetes import client

    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
    )
    core = client.CoreV1Api(api_client)
    issued = core.create_namespaced_service_account_token("robot", namespace, request)
    configuration = client.Configuration()
    configuration.host = controlplane.server
    configuration.ssl_ca_cert = str(controlplane.state_dir / "pki" / "ca.crt")
    configuration.api_key = {"authorization": f"Bearer {issued.status.token}"}
    with client.ApiClient(configuration) as token_api:
        yield token_api


def test_kubectl_as_a_service_account_is_refused_then_allowed_by_a_rolebinding(
    controlplane: Any, namespace: str, robot: str, tmp_path: Path, wait_for: Any
):
    token = controlplane.kubectl("create", "token", "robot", "-n", namespace).stdout.strip()
    config = str(token_kubeconfig(controlplane, token, tmp_path / "robot.kubeconfig"))

    def as_robot(*args: str) -> Any:
        return controlplane.kubectl("--kubeconfig", config, *args, check=False)

    whoami = json.loads(as_robot("auth", "whoami", "-o", "json").stdout)
    assert whoami["status"]["userInfo"]["username"] == robot

    refused = as_robot("get", "configmap", "settings", "-n", namespace)
    assert refused.returncode != 0
    assert "Forbidden" in refused.stderr and f'User "{robot}" cannot get' in refused.stderr

    controlplane.kubectl("apply", "-n", namespace, "-f", "-", input=ROLE)

    def can_get() -> Any:
        result = as_robot("get", "configmap", "settings", "-n", namespace, "-o", "name")
        return result if result.returncode == 0 else None

    assert wait_for(can_get).stdout.strip() == "configmap/settings"
    assert as_robot("auth", "can-i", "delete", "configmaps", "-n", namespace).stdout.strip() == "no"
    assert as_robot("get", "configmaps", "-n", "default").returncode != 0  # only its namespace


def test_the_python_client_with_a_requested_token_gets_403_then_200(
    controlplane: Any, namespace: str, token_client: Any, wait_for: Any
):
    from kubernetes import client

    core = client.CoreV1Api(token_client)
    with pytest.raises(client.ApiException) as refused:
        core.list_namespaced_config_map(namespace)
    assert refused.value.status == 403
    assert json.loads(refused.value.body)["reason"] == "Forbidden"

    controlplane.kubectl("apply", "-n", namespace, "-f", "-", input=ROLE)

    def listed() -> list[str]:
        try:
            return [cm.metadata.name for cm in core.list_namespaced_config_map(namespace).items]
        except client.ApiException as error:
            assert error.status == 403
            raise AssertionError("still forbidden") from error

    assert "settings" in wait_for(listed)
    with pytest.raises(client.ApiException) as still_refused:
        core.delete_namespaced_config_map("settings", namespace)
    assert still_refused.value.status == 403


def test_a_requested_token_is_a_signed_jwt_the_api_server_reviews(
    controlplane: Any, api_client: Any, namespace: str, robot: str
):
    from kubernetes import client

    token = controlplane.kubectl("create", "token", "robot", "-n", namespace).stdout.strip()
    assert token.count(".") == 2  # header.payload.signature
    review = client.AuthenticationV1Api(api_client).create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
    )
    assert review.status.authenticated is True
    assert review.status.user.username == robot
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    review = client.AuthenticationV1Api(api_client).create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=forged))
    )
    assert not review.status.authenticated
