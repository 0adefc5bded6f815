"""The generated MigrationRun CRD on the real API server: every bound of the models is refused
by the API server itself (kubectl apply --dry-run=server), with the field named; workspace and
source cannot change; defaults are filled in."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from tests.k8s import operator_bench

from ferryman_worker.runspec import RunOptions

pytestmark = pytest.mark.k8s

RUN: dict[str, Any] = {
    "apiVersion": "ferryman.dev/v1alpha1",
    "kind": "MigrationRun",
    "metadata": {"name": "bounded"},
    "spec": {
        "workspace": "crd-bounds",  # none of the operator tests' workspaces
        "source": {
            "provider": "democrm",
            "baseURL": "http://127.0.0.1:8765",
            "credentialsSecretRef": {"name": "democrm-token"},
        },
    },
}


@pytest.fixture(scope="module")
def crd(controlplane: Any) -> Iterator[str]:
    operator_bench.install_crd(controlplane)
    namespace = f"crd-{uuid.uuid4().hex[:6]}"
    controlplane.kubectl("create", "namespace", namespace)
    yield namespace
    controlplane.kubectl("delete", "mrun", "--all", "-n", namespace, "--wait=false", check=False)
    controlplane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def changed(path: str, value: Any) -> dict[str, Any]:
    document = copy.deepcopy(RUN)
    *parents, last = path.split(".")
    node = document
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return document


def refusal(controlplane: Any, namespace: str, document: dict[str, Any]) -> str:
    result = controlplane.kubectl(
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(document),
        check=False,
    )
    assert result.returncode != 0, f"accepted: {json.dumps(document['spec'])}"
    return str(result.stderr)


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (
            "spec.options.stripes",
            0,
            "spec.options.stripes: Invalid value: 0: "
            "spec.options.stripes in body should be greater than or equal to 1",
        ),
        (
            "spec.options.stripes",
            65,
            "spec.options.stripes in body should be less than or equal to 64",
        ),
        (
            "spec.options.pageSize",
            10_001,
            "spec.options.pageSize in body should be less than or equal to 10000",
        ),
        (
            "spec.options.pageSize",
            0,
            "spec.options.pageSize in body should be greater than or equal to 1",
        ),
        (
            "spec.options.windowSize",
            61,
            "spec.options.windowSize in body should be less than or equal to 60",
        ),
        (
            "spec.options.maxInFlight",
            1001,
            "spec.options.maxInFlight in body should be less than or equal to 1000",
        ),
        (
            "spec.options.fetchThreads",
            17,
            "spec.options.fetchThreads in body should be less than or equal to 16",
        ),
        (
            "spec.options.parentsPerTask",
            0,
            "spec.options.parentsPerTask in body should be greater than or equal to 1",
        ),
        (
            "spec.options.parentsPerTask",
            1001,
            "spec.options.parentsPerTask in body should be less than or equal to 1000",
        ),
        (
            "spec.ttlSecondsAfterFinished",
            -1,
            "spec.ttlSecondsAfterFinished in body should be greater than or equal to 0",
        ),
        ("spec.workspace", "Acme_Corp", "spec.workspace in body should match"),
        ("spec.workspace", "a" * 64, "spec.workspace: Too long"),
        ("spec.source.provider", "Demo-CRM", "spec.source.provider in body should match"),
        (
            "spec.source.credentialsSecretRef.name",
            "Not A Name",
            "spec.source.credentialsSecretRef.name in body should match",
        ),
        (
            "spec.source.rateLimit",
            {"tokensPerSecond": 0, "burst": 1},
            "spec.source.rateLimit.tokensPerSecond in body should be greater than 0",
        ),
        (
            "spec.source.rateLimit",
            {"tokensPerSecond": 1, "burst": 0},
            "spec.source.rateLimit.burst in body should be greater than or equal to 1",
        ),
        ("spec.kinds", ["people", "people"], 'spec.kinds[1]: Duplicate value: "people"'),
        ("spec.kinds", ["People"], "spec.kinds[0] in body should match"),
        ("spec.conflictPolicy", "Later", 'spec.conflictPolicy: Unsupported value: "Later"'),
        ("spec.suspend", "yes", "spec.suspend in body must be of type boolean"),
        ("spec.priority", 3, 'unknown field "spec.priority"'),
        ("spec.source.token", "s3cret", 'unknown field "spec.source.token"'),
    ],
)
def test_the_api_server_refuses_each_bound_naming_the_field(
    controlplane: Any, crd: str, path: str, value: Any, expected: str
) -> None:
    message = refusal(controlplane, crd, changed(path, value))
    assert expected in message


SECRET = "hunter2-Secret"
FORBIDDEN = "spec.source.baseURL: Forbidden: "


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"ftp://user:{SECRET}@example.com", FORBIDDEN + "must be an http:// or https:// URL"),
        (f"https://user:{SECRET}@example.com", FORBIDDEN + "must not carry credentials"),
        (f"https://example.com/?password={SECRET}", FORBIDDEN + "must not have a query"),
        (f"https://example.com/#{SECRET}", FORBIDDEN + "must not have a query or fragment"),
        (f"https://user {SECRET}", FORBIDDEN + "must be an http(s) URL with a host"),
        (
            f"https://example.com/{'a' * 2048}?password={SECRET}",
            "spec.source.baseURL: Too long: may not be more than 2048 bytes",
        ),
    ],
)
def test_a_refused_base_url_is_named_but_never_quoted_back(
    controlplane: Any, crd: str, url: str, expected: str
) -> None:
    """The base URL may hold a password: the API server's refusal names the field and the rule,
    and kubectl's output (both streams) does not contain the URL."""
    document = changed("spec.source.baseURL", url)
    result = controlplane.kubectl(
        "apply", "-n", crd, "-f", "-", input=json.dumps(document), check=False
    )
    assert result.returncode != 0, f"accepted: {url}"
    assert expected in result.stderr, result.stderr
    assert SECRET not in result.stdout + result.stderr


def test_a_missing_required_field_is_named(controlplane: Any, crd: str) -> None:
    document = copy.deepcopy(RUN)
    del document["spec"]["source"]["credentialsSecretRef"]
    assert "spec.source.credentialsSecretRef: Required value" in refusal(
        controlplane, crd, document
    )


def test_defaults_come_from_the_models_and_status_starts_pending(
    controlplane: Any, crd: str
) -> None:
    controlplane.kubectl("apply", "-n", crd, "-f", "-", input=json.dumps(RUN))
    stored = controlplane.kubectl_json("get", "mrun", "bounded", "-n", crd)
    # the API server fills in exactly the models' defaults (maxInFlight has none: null)
    assert stored["spec"]["options"] == RunOptions().model_dump(by_alias=True, exclude_none=True)
    assert stored["spec"]["options"]["windowSize"] == 50
    assert stored["spec"]["suspend"] is False and stored["spec"]["conflictPolicy"] == "Queue"
    assert stored["spec"]["mode"] == "Full"
    assert stored["spec"]["source"]["credentialsSecretRef"]["key"] == "token"
    assert stored["status"]["state"] == "Pending"
    listed = controlplane.kubectl("get", "ferryman", "-n", crd).stdout  # the category
    assert "bounded" in listed and "Pending" in listed


def test_workspace_and_source_cannot_change_once_created(controlplane: Any, crd: str) -> None:
    original = changed("metadata.name", "fixed")
    controlplane.kubectl("apply", "-n", crd, "-f", "-", input=json.dumps(original))
    moved = copy.deepcopy(original)
    moved["spec"]["workspace"] = "globex"
    message = refusal(controlplane, crd, moved)
    assert (
        'spec.workspace: Invalid value: "globex": is immutable once the run is created' in message
    )
    elsewhere = copy.deepcopy(original)
    elsewhere["spec"]["source"]["baseURL"] = "http://127.0.0.1:9999"
    assert "spec.source: Invalid value: is immutable once the run is created" in refusal(
        controlplane, crd, elsewhere
    )
    delta = copy.deepcopy(original)
    delta["spec"]["mode"] = "Delta"  # a full run does not become a delta: a new run is one
    assert 'spec.mode: Invalid value: "Delta": is immutable once the run is created' in refusal(
        controlplane, crd, delta
    )
    paused = copy.deepcopy(original)
    paused["spec"]["suspend"] = True  # the rest of the spec may change
    controlplane.kubectl(
        "apply", "--dry-run=server", "-n", crd, "-f", "-", input=json.dumps(paused)
    )
