"""The calls kopf does not make for us, through the ``kubernetes`` client on threads: the
worker Deployment and the pool spec, deleting a finished run (TTL), and the Lease.

Configured once: in-cluster when the pod's service account is mounted, else ``KUBECONFIG``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes import client, config

from ferryman_operator import crd


def api_client() -> Any:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


class Kube:
    """The few API calls the operator makes itself."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.coordination = client.CoordinationV1Api(api)

    async def configmaps(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        found = await asyncio.to_thread(
            self.core.list_namespaced_config_map, namespace, label_selector=selector
        )
        return [self.api.sanitize_for_serialization(item) for item in found.items]

    async def deployments(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        found = await asyncio.to_thread(
            self.apps.list_namespaced_deployment, namespace, label_selector=selector
        )
        return [  # list items lack apiVersion and kind, which an Event's reference needs
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                **self.api.sanitize_for_serialization(d),
            }
            for d in found.items
        ]

    async def patch_deployment(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        await asyncio.to_thread(self.apps.patch_namespaced_deployment, name, namespace, patch)

    async def delete_run(self, namespace: str, name: str) -> None:
        try:
            await asyncio.to_thread(
                self.custom.delete_namespaced_custom_object,
                crd.GROUP,
                crd.VERSION,
                namespace,
                crd.PLURAL,
                name,
            )
        except client.ApiException as exc:
            if exc.status != 404:
                raise
