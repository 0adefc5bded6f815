"""A CustomResourceDefinition on the real API server, used with kubectl and the Python client."""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.k8s

CRD = Path(__file__).parent / "data" / "widgets-crd.yaml"
GROUP, VERSION, PLURAL = "tests.ferryman.dev", "v1alpha1", "widgets"


@pytest.fixture(scope="module")
def widgets(controlplane: Any) -> Iterator[None]:
    """The Widget CRD, applied and Established; deleted (with its objects) afterwards."""
    controlplane.kubectl("apply", "-f", str(CRD))
    controlplane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/widgets.tests.ferryman.dev"
    )
    yield
    controlplane.kubectl("delete", "-f", str(CRD), "--timeout=60s")


def widget(name: str, **spec: Any) -> str:
    manifest = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec,
    }
    return json.dumps(manifest)


def apply(controlplane: Any, namespace: str, manifest: str, **kwargs: Any) -> Any:
    return controlplane.kubectl("apply", "-n", namespace, "-f", "-", input=manifest, **kwargs)


@contextlib.contextmanager
def kubectl_watch(controlplane: Any, *args: str) -> Iterator[Callable[..., dict[str, Any]]]:
    """`kubectl get --watch --output-watch-events -o json`; yields `next_event(predicate)`."""
    argv = [str(controlplane.kubectl_path), "get", *args, "--watch", "--output-watch-events"]
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    with subprocess.Popen(
        [*argv, "-o", "json"], env=controlplane.env, stdout=subprocess.PIPE, text=True
    ) as proc:

        def read() -> None:  # an event a line (kubectl prints them compact), or several lines
            pending = ""
            for line in proc.stdout or ():
                pending += line
                try:
                    events.put(json.loads(pending))
                    pending = ""
                except json.JSONDecodeError:
                    continue

        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        def next_event(predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
            while True:
                event = events.get(timeout=30)
                if predicate(event):
                    return event

        try:
            yield next_event
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            reader.join(timeout=10)


def test_the_crd_is_established_and_its_schema_is_published(
    controlplane: Any, widgets: None, wait_for: Any
):
    crd = controlplane.kubectl_json("get", "crd", "widgets.tests.ferryman.dev")
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"

    def explain() -> str:  # the OpenAPI document is published shortly after Established
        return str(controlplane.kubectl("explain", "widgets.spec.color", check=False).stdout)

    explained = wait_for(explain)
    assert "FIELD: color <string>" in explained
    assert "ENUM:" in explained and "red" in explained


def test_kubectl_creates_gets_and_lists_with_defaults_and_printer_columns(
    controlplane: Any, widgets: None, namespace: str
):
    apply(controlplane, namespace, widget("small", size=3))
    apply(controlplane, namespace, widget("large", size=50, minSize=10, color="red"))

    small = controlplane.kubectl_json("get", "widget", "small", "-n", namespace)
    assert small["spec"] == {"size": 3, "minSize": 1, "color": "blue"}  # schema defaults
    listed = controlplane.kubectl_json("get", "wdg", "-n", namespace)  # the short name
    assert [item["metadata"]["name"] for item in listed["items"]] == ["large", "small"]

    table = controlplane.kubectl("get", "widgets", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "SIZE", "COLOR", "STATE", "AGE"]
    assert table[1].split()[:3] == ["large", "50", "red"]
    assert table[2].split()[:3] == ["small", "3", "blue"]


def test_kubectl_watches_and_patches_the_status_subresource(
    controlplane: Any, widgets: None, namespace: str
):
    apply(controlplane, namespace, widget("w", size=2))
    with kubectl_watch(controlplane, "widgets", "-n", namespace) as next_event:
        added = next_event(lambda e: e["type"] == "ADDED")
        assert added["object"]["metadata"]["name"] == "w"
        status = {"status": {"state": "Ready", "observedGeneration": 1}}
        controlplane.kubectl(
            "patch", "widget", "w", "-n", namespace, "--subresource=status", "--type=merge",
            "-p", json.dumps(status),
        )  # fmt: skip
        modified = next_event(lambda e: e["type"] == "MODIFIED")
    assert modified["object"]["status"] == {"state": "Ready", "observedGeneration": 1}

    # Through the main resource, .status is ignored; through /status, .spec is.
    controlplane.kubectl(
        "patch", "widget", "w", "-n", namespace, "--type=merge",
        "-p", '{"spec": {"size": 4}, "status": {"state": "Hacked"}}',
    )  # fmt: skip
    controlplane.kubectl(
        "patch", "widget", "w", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", '{"spec": {"size": 99}}',
    )  # fmt: skip
    w = controlplane.kubectl_json("get", "widget", "w", "-n", namespace)
    assert w["spec"]["size"] == 4
    assert w["status"]["state"] == "Ready"
    assert w["metadata"]["generation"] == 2  # the spec change only
    row = controlplane.kubectl("get", "widget", "w", "-n", namespace, "--no-headers").stdout
    assert row.split()[:4] == ["w", "4", "blue", "Ready"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"size": 2, "minSize": 5}, "size must be at least minSize"),  # CEL
        ({"size": 0}, "should be greater than or equal to 1"),
        ({"size": 1, "color": "purple"}, 'Unsupported value: "purple"'),
        ({"minSize": 1}, "spec.size: Required value"),
        ({"size": 1, "bogus": True}, 'unknown field "spec.bogus"'),  # strict field validation
    ],
)
def test_the_api_server_rejects_an_invalid_widget_with_its_message(
    controlplane: Any, widgets: None, namespace: str, spec: dict[str, Any], message: str
):
    result = apply(controlplane, namespace, widget("bad", **spec), check=False)
    assert result.returncode != 0
    assert message in result.stderr
    missing = controlplane.kubectl("get", "widget", "bad", "-n", namespace, check=False)
    assert "NotFound" in missing.stderr


def test_a_cel_transition_rule_refuses_an_update(controlplane: Any, widgets: None, namespace: str):
    apply(controlplane, namespace, widget("w", size=1, color="green"))
    result = apply(controlplane, namespace, widget("w", size=1, color="red"), check=False)
    assert result.returncode != 0
    assert "color is immutable" in result.stderr
    w = controlplane.kubectl_json("get", "widget", "w", "-n", namespace)
    assert w["spec"]["color"] == "green"


def test_the_python_client_creates_lists_watches_and_patches_status(
    api_client: Any, widgets: None, namespace: str
):
    from kubernetes import client, watch

    api = client.CustomObjectsApi(api_client)
    args = (GROUP, VERSION, namespace, PLURAL)
    created = api.create_namespaced_custom_object(*args, json.loads(widget("py", size=7)))
    assert created["spec"] == {"size": 7, "minSize": 1, "color": "blue"}
    uid = created["metadata"]["uid"]
    assert api.get_namespaced_custom_object(*args, "py")["metadata"]["uid"] == uid
    listed = api.list_namespaced_custom_object(*args)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["py"]

    patched = api.patch_namespaced_custom_object_status(
        *args, "py", {"status": {"state": "Running"}}
    )
    assert patched["status"] == {"state": "Running"}

    watcher = watch.Watch()
    seen = []
    resource_version = listed["metadata"]["resourceVersion"]  # events after the list
    stream = watcher.stream(
        api.list_namespaced_custom_object, *args, resource_version=resource_version,
        timeout_seconds=30,
    )  # fmt: skip
    for event in stream:
        seen.append((event["type"], event["object"].get("status", {}).get("state")))
        if seen[-1] == ("MODIFIED", "Running"):
            watcher.stop()
    assert seen == [("MODIFIED", "Running")]


def test_the_python_client_sees_the_rejection_and_its_message(
    api_client: Any, widgets: None, namespace: str
):
    from kubernetes import client

    api = client.CustomObjectsApi(api_client)
    with pytest.raises(client.ApiException) as rejected:
        body = json.loads(widget("bad", size=2, minSize=5))
        api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    assert rejected.value.status == 422
    details = json.loads(rejected.value.body)
    assert details["reason"] == "Invalid"
    assert "size must be at least minSize" in details["message"]
