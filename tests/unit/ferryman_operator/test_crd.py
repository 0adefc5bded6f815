"""The CRD files are the generator's output, and the generator turns the models into a
structural schema with every bound."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ferryman_operator import crd

ROOT = Path(__file__).resolve().parents[3]
COPIES = [
    (folder, resource) for resource in crd.RESOURCES for folder in ("crds", "charts/ferryman/crds")
]


@pytest.mark.parametrize(("folder", "resource"), COPIES)
def test_the_crd_file_is_what_the_generator_writes(folder: str, resource: crd.Resource) -> None:
    path = ROOT / folder / resource.file
    assert path.read_text() == crd.render(resource), f"{path} is stale: run hack/gen-crd"


def test_crds_holds_exactly_the_generated_files() -> None:
    for folder in ("crds", "charts/ferryman/crds"):
        assert sorted(p.name for p in (ROOT / folder).iterdir()) == sorted(
            r.file for r in crd.RESOURCES
        )


def _schema(resource: crd.Resource = crd.RUN) -> dict[str, Any]:
    version = crd.definition(resource)["spec"]["versions"][0]
    return dict(version["schema"]["openAPIV3Schema"])


def _walk(node: dict[str, Any], path: str = "") -> dict[str, dict[str, Any]]:
    found = {path: node}
    for name, child in (node.get("properties") or {}).items():
        found |= _walk(child, f"{path}.{name}" if path else name)
    if "items" in node:
        found |= _walk(node["items"], f"{path}[]")
    return found


def test_every_option_bound_of_the_models_is_in_the_schema() -> None:
    nodes = _walk(_schema())
    bounds = {
        "spec.options.stripes": (1, 64),
        "spec.options.pageSize": (1, 10_000),
        "spec.options.windowSize": (1, 60),
        "spec.options.maxInFlight": (1, 1000),
        "spec.options.fetchThreads": (1, 16),
        "spec.options.parentsPerTask": (1, 1000),
    }
    for path, (low, high) in bounds.items():
        assert (nodes[path]["minimum"], nodes[path]["maximum"]) == (low, high), path
    assert nodes["spec.workspace"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    assert nodes["spec.workspace"]["maxLength"] == 63
    rate = nodes["spec.source.rateLimit.tokensPerSecond"]
    assert rate["minimum"] == 0 and rate["exclusiveMinimum"] is True


def _nodes(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node, properties, items and map values alike."""
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("resource", crd.RESOURCES, ids=lambda r: r.kind)
def test_the_schema_is_structural(resource: crd.Resource) -> None:
    """No references, unions, titles, consts or key patterns; every node has a type unless it
    is declared as any value; a map keeps its values' schema."""
    text = yaml.safe_dump(crd.definition(resource))
    words = ["$ref", "anyOf", "oneOf", "title:", "const:", "patternProperties", "propertyNames"]
    words += ["discriminator", "additionalProperties: false", "additionalProperties: true"]
    for word in words:
        assert word not in text, word
    for path, node in _nodes(_schema(resource)):
        assert node.get("type") or node.get("x-kubernetes-preserve-unknown-fields"), path


def test_a_map_keeps_its_values_schema() -> None:
    nodes = dict(_nodes(_schema()))
    assert nodes[".spec.source.options{}"] == {"maxLength": 1024, "type": "string"}
    provider = dict(_nodes(_schema(crd.PROVIDER)))
    kind = provider[".spec.kinds{}"]
    assert kind["required"] == ["request", "fields"]
    assert provider[".spec.kinds{}.request.body"]["x-kubernetes-preserve-unknown-fields"]


def test_a_discriminated_union_is_one_object_whose_branch_fields_have_no_defaults() -> None:
    """The API server would otherwise fill one style's defaults (offsetParam) into another's
    pagination, which the model then refuses as an unknown field."""
    pagination = dict(_nodes(_schema(crd.PROVIDER)))[".spec.kinds{}.pagination"]
    assert pagination["type"] == "object" and pagination["required"] == ["style"]
    assert pagination["properties"]["style"]["enum"] == [
        "offset", "page_number", "next_url", "link_header", "cursor", "keyset", "single"
    ]  # fmt: skip
    assert {"offsetParam", "pageParam", "next", "send"} <= set(pagination["properties"])
    assert not [f for f, n in pagination["properties"].items() if "default" in n]
    assert "default" not in pagination


def test_the_mapping_and_provider_crds_are_namespaced_with_their_columns() -> None:
    for resource, short, columns in (
        (crd.PROVIDER, "mprov", ["Auth", "Age"]),
        (crd.MAPPING, "mmap", ["Provider", "Age"]),
    ):
        spec = crd.definition(resource)["spec"]
        assert spec["scope"] == "Namespaced" and spec["names"]["shortNames"] == [short]
        version = spec["versions"][0]
        assert "subresources" not in version
        narrow = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
        assert narrow == columns


def test_workspace_and_source_are_immutable_and_defaults_come_from_the_models() -> None:
    nodes = _walk(_schema())
    for path in ("spec.workspace", "spec.source"):
        rule = nodes[path]["x-kubernetes-validations"][0]
        assert rule["rule"] == "self == oldSelf" and "immutable" in rule["message"]
    assert nodes["spec.options"]["default"] == {}
    assert nodes["spec.options.pageSize"]["default"] == 500
    assert nodes["spec.conflictPolicy"]["default"] == "Queue"
    assert nodes["spec.conflictPolicy"]["enum"] == ["Queue", "Reject"]
    assert nodes["status.state"]["default"] == "Pending"


def test_the_status_declares_every_field_of_the_status_model() -> None:
    from ferryman_worker.runspec import MigrationRunStatus

    declared = set(_schema()["properties"]["status"]["properties"])
    assert declared == {f.alias for f in MigrationRunStatus.model_fields.values()}


def test_printer_columns_and_the_wide_ones() -> None:
    columns = crd.definition()["spec"]["versions"][0]["additionalPrinterColumns"]
    narrow = [c["name"] for c in columns if not c.get("priority")]
    wide = [c["name"] for c in columns if c.get("priority")]
    assert narrow == ["Workspace", "State", "Phase", "Tasks", "Rows", "Complete", "Reason", "Age"]
    assert wide == ["Skipped", "Failed", "ETA", "Verdicts", "Verified", "Message"]
