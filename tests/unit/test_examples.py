"""The Kubernetes forms of the examples agree with the files ``ferryman run`` reads: the
MigrationMapping's spec is the mapping file's document, the providers are MigrationProvider
documents, and the runs load with the model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ferryman_worker import contract, runspec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_sales_migration_mapping_is_the_sales_mapping_file() -> None:
    resource = yaml.safe_load((EXAMPLES / "apps/sales/migrationmapping.yaml").read_text())
    mapping = yaml.safe_load((EXAMPLES / "apps/sales/mapping.yaml").read_text())
    assert (resource["apiVersion"], resource["kind"]) == (
        "ferryman.dev/v1alpha1",
        "MigrationMapping",
    )
    assert resource["spec"] == mapping
    assert contract.mapping_document(resource["spec"], "sales")["provider"] == "jsonserver"


@pytest.mark.parametrize("source", ["json-server", "kubernetes", "pocketbase"])
def test_each_example_provider_is_a_migration_provider(source: str) -> None:
    document = yaml.safe_load((EXAMPLES / "sources" / source / "provider.yaml").read_text())
    assert (document["apiVersion"], document["kind"]) == (
        "ferryman.dev/v1alpha1",
        "MigrationProvider",
    )
    name = document["metadata"]["name"]
    assert contract.provider_definition(name, document["spec"], source)["metadata"]["name"] == name


def test_the_json_server_run_on_kubernetes_names_the_provider_and_the_mapping() -> None:
    run = runspec.load_run_file(EXAMPLES / "sources/json-server/migrationrun.yaml")
    provider = yaml.safe_load((EXAMPLES / "sources/json-server/provider.yaml").read_text())
    assert run.spec.source.provider == provider["metadata"]["name"]
    assert run.spec.mapping is not None and run.spec.mapping.name == "sales"
