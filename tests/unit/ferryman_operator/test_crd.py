"""The CRD files are the generator's output, and the generator turns the models into a
structural schema with every bound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ferryman_operator import crd

ROOT = Path(__file__).resolve().parents[3]
COPIES = (
    "crds/migrationruns.ferryman.dev.yaml",
    "charts/ferryman/crds/migrationruns.ferryman.dev.yaml",
)


@pytest.mark.parametrize("path", COPIES)
def test_the_crd_file_is_what_the_generator_writes(path: str) -> None:
    assert (ROOT / path).read_text() == crd.render(), f"{path} is stale: run hack/gen-crd"


def _schema() -> dict[str, Any]:
    version = crd.definition()["spec"]["versions"][0]
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


def test_the_schema_is_structural_no_refs_anyof_titles_or_additional_properties() -> None:
    text = yaml.safe_dump(crd.definition())
    for word in ("$ref", "anyOf", "title:", "additionalProperties", "const:"):
        assert word not in text


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
    assert narrow == ["Workspace", "State", "Phase", "Tasks", "Rows", "Age"]
    assert wide == ["Skipped", "Failed", "ETA", "Message"]
