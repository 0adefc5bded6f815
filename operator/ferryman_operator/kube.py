"""The calls kopf does not make for us, through the ``kubernetes`` client on threads: the
worker Deployment and the pool spec, a run's Secret, MigrationProvider and MigrationMapping at
admission, deleting a finished run (TTL), and the Lease.

Configured once: in-cluster when the pod's service account is mounted, else ``KUBECONFIG``.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import Any

from kubernetes import client, config

from ferryman_operator import crd


class NotLeading(Exception):
    """A write was asked of a process that does not hold the Lease (any longer)."""


class _TimedApiClient(client.ApiClient):  # type: ignore[misc]
    """An ApiClient whose every request has a timeout (the client's default is none: a request
    to a server that went silent waits forever)."""

    def __init__(self, timeout: float) -> None:
        super().__init__()
        self.timeout = timeout

    def call_api(self, *args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        timeout = self.timeout if _request_timeout is None else _request_timeout
        return super().call_api(*args, _request_timeout=timeout, **kwargs)


def api_client(timeout: float) -> Any:
    """A client for the cluster, every request of it limited to ``timeout`` seconds."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return _TimedApiClient(timeout)


class Kube:
    """The few API calls the operator makes itself. Its writes happen only while ``acting``
    says so (the Lease is held and fresh): else they raise NotLeading."""

    def __init__(self, api: Any, acting: Callable[[], bool] = lambda: True) -> None:
        self.api = api
        self.acting = acting
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

    async def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Secret's ``data`` and ``annotations`` (None: there is no such Secret;
        PermissionError: the operator may not read it). Nothing of it is logged."""
        found = await _get(
            f"Secret {namespace}/{name}", self.core.read_namespaced_secret, name, namespace
        )
        if found is None:
            return None
        return {
            "data": dict(found.data or {}),
            "annotations": dict(found.metadata.annotations or {}),
        }

    async def custom_object(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The ferryman.dev object ``name`` of ``plural`` in ``namespace`` (None: there is no
        such object; PermissionError: the operator may not read it)."""
        read = self.custom.get_namespaced_custom_object
        found = await _get(
            f"{plural} {namespace}/{name}", read, crd.GROUP, crd.VERSION, namespace, plural, name
        )
        return None if found is None else dict(found)

    def _leading(self, what: str) -> None:
        if not self.acting():
            raise NotLeading(f"not holding the Lease: {what} is left to the leader")

    async def patch_deployment(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._leading(f"patching Deployment {namespace}/{name}")
        await asyncio.to_thread(self.apps.patch_namespaced_deployment, name, namespace, patch)

    async def post_event(self, obj: dict[str, Any], kind: str, reason: str, message: str) -> None:
        """A core Event on ``obj``, made here rather than through kopf (the pool-spec check runs
        outside kopf's handlers, where kopf's event queue is not available)."""
        meta = obj["metadata"]
        self._leading(f"posting Event {reason}")
        now = datetime.datetime.now(datetime.UTC)
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                generate_name=f"{meta['name']}.", namespace=meta["namespace"]
            ),
            involved_object=client.V1ObjectReference(
                api_version=obj.get("apiVersion"),
                kind=obj.get("kind"),
                name=meta["name"],
                namespace=meta["namespace"],
                uid=meta.get("uid"),
            ),
            reason=reason,
            message=message[:1000],
            type=kind,
            source=client.V1EventSource(component="ferryman-operator"),
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        await asyncio.to_thread(self.core.create_namespaced_event, meta["namespace"], event)

    async def delete_run(self, namespace: str, name: str) -> None:
        self._leading(f"deleting MigrationRun {namespace}/{name}")
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

    async def patch_run_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Merge ``status`` into the run's ``.status`` (a key set to None goes); a run gone
        meanwhile is left alone."""
        self._leading(f"patching the status of MigrationRun {namespace}/{name}")
        try:
            await asyncio.to_thread(
                self.custom.patch_namespaced_custom_object_status,
                crd.GROUP,
                crd.VERSION,
                namespace,
                crd.PLURAL,
                name,
                {"status": status},
            )
        except client.ApiException as exc:
            if exc.status != 404:
                raise


async def _get(what: str, call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)`` on a thread: None when the object does not exist, PermissionError when
    the operator may not read it."""
    try:
        return await asyncio.to_thread(call, *args)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        if exc.status == 403:
            raise PermissionError(f"get {what}: forbidden") from None
        raise
