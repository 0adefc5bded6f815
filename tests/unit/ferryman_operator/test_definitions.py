"""Which provider and mapping a run gets at admission, decided from what its namespace holds:
a MigrationProvider of the name (else a built-in, else refused), the MigrationMapping it names;
each checked by its model, every problem one line; ``spec.kinds`` checked against the provider;
``spec.mapping.file`` refused with what to use instead. (The resources on a real API server:
tests/k8s/test_operator_definitions.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.unit.test_runspec import VALID

from ferryman_operator.reconcile import definitions
from ferryman_operator.reconcile.status import Refusal
from ferryman_worker import contract
from ferryman_worker.contract import MappingInvalid
from ferryman_worker.runspec.models import MappingRef

ROOT = Path(__file__).resolve().parents[3]
PROVIDER = yaml.safe_load((ROOT / "examples/sources/json-server/provider.yaml").read_text())
MAPPING = yaml.safe_load((ROOT / "examples/apps/sales/mapping.yaml").read_text())


def _resource(spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x", "namespace": "team"}, "spec": spec}


def test_a_migration_provider_of_the_runs_namespace_is_its_definition() -> None:
    found = definitions.provider_of("jsonserver", "team", _resource(PROVIDER["spec"]), False)
    assert isinstance(found, dict)
    assert found["metadata"] == {"name": "jsonserver"}
    assert list(found["spec"]["kinds"]) == ["organizations", "people", "deals", "notes"]


def test_a_migration_provider_wins_over_a_built_in_of_the_same_name() -> None:
    found = definitions.provider_of("democrm", "team", _resource(PROVIDER["spec"]), True)
    assert isinstance(found, dict) and found["metadata"]["name"] == "democrm"


def test_without_a_migration_provider_a_built_in_is_used() -> None:
    assert definitions.provider_of("democrm", "team", None, True) is None


def test_neither_a_migration_provider_nor_a_built_in_refuses_naming_both_and_the_fix() -> None:
    refused = definitions.provider_of("hubspot", "team", None, False)
    assert isinstance(refused, Refusal) and refused.reason == "ProviderNotFound"
    assert "no MigrationProvider 'hubspot' in namespace 'team'" in refused.message
    assert "no built-in provider 'hubspot'" in refused.message
    assert "kubectl apply -n team" in refused.message and "ferryman.dev/retry" in refused.message


def test_a_provider_the_model_refuses_is_refused_one_line_per_problem() -> None:
    """What the API server's schema cannot say (a rule across fields) the model says."""
    spec = yaml.safe_load(yaml.safe_dump(PROVIDER["spec"]))
    spec["kinds"]["people"]["walk"] = "tree"  # a tree kind needs a parent
    spec["kinds"]["notes"]["id"] = "missing"  # not among its fields
    refused = definitions.provider_of("jsonserver", "team", _resource(spec), False)
    assert isinstance(refused, Refusal) and refused.reason == "ProviderInvalid"
    lines = refused.message.splitlines()
    assert lines[0] == (
        "spec.source.provider: MigrationProvider 'jsonserver' in namespace 'team': 2 problem(s):"
    )
    assert sorted(line.split(":")[0] for line in lines[1:3]) == [
        "  spec.kinds.notes",
        "  spec.kinds.people",
    ]
    assert "a tree kind needs `parent`" in refused.message
    assert "the id field 'missing' is not among `fields`" in refused.message
    assert lines[3].startswith("fix the MigrationProvider, then retry the run")


def test_a_run_naming_no_mapping_gets_none() -> None:
    assert definitions.mapping_of(None, "team", None) is None


def test_a_named_migration_mapping_is_the_runs_mapping() -> None:
    found = definitions.mapping_of(MappingRef(name="sales"), "team", _resource(MAPPING))
    assert isinstance(found, dict)
    assert found["provider"] == MAPPING["provider"]
    assert found["kinds"]["people"]["table"] == "sales.contacts"


def test_a_missing_migration_mapping_refuses_naming_it_and_the_fix() -> None:
    refused = definitions.mapping_of(MappingRef(name="sales"), "team", None)
    assert isinstance(refused, Refusal) and refused.reason == "MappingNotFound"
    assert "no MigrationMapping 'sales' in namespace 'team'" in refused.message
    assert "kubectl apply -n team -f mapping.yaml" in refused.message


def test_a_mapping_the_model_refuses_is_refused_one_line_per_problem() -> None:
    spec = {"provider": "jsonserver", "kinds": {"people": {"table": "Bad Name", "columns": {}}}}
    refused = definitions.mapping_of(MappingRef(name="sales"), "team", _resource(spec))
    assert isinstance(refused, Refusal) and refused.reason == "MappingInvalid"
    lines = refused.message.splitlines()
    assert lines[0].startswith("spec.mapping.name: MigrationMapping 'sales' in namespace 'team'")
    assert [line.split(":")[0] for line in lines[1:3]] == [
        "  kinds.people.table",
        "  kinds.people.columns",
    ]


@pytest.mark.parametrize("file", ["mapping.yaml", "../apps/sales/mapping.yaml"])
def test_a_mapping_file_is_refused_on_kubernetes_naming_spec_mapping_name(file: str) -> None:
    refused = definitions.mapping_of(MappingRef(file=file), "team", None)
    assert isinstance(refused, Refusal) and refused.reason == "InvalidSpec"
    assert refused.message.startswith(f"spec.mapping.file: {file!r} is read by `ferryman run`")
    assert "MigrationMapping" in refused.message and "spec.mapping.name" in refused.message


def test_a_mapping_the_catalog_refuses_names_the_resource_and_keeps_every_line() -> None:
    error = MappingInvalid("mapping for 'jsonserver' cannot write here:\n  a\n  b")
    refused = definitions.refused_by_catalog(MappingRef(name="sales"), "team", error)
    assert refused.reason == "MappingInvalid"
    assert refused.message.splitlines()[:3] == [
        "spec.mapping.name: MigrationMapping 'sales' in namespace 'team': mapping for "
        "'jsonserver' cannot write here:",
        "  a",
        "  b",
    ]


def test_a_migration_provider_of_several_kinds_must_declare_their_order() -> None:
    """The API server gives a map's keys back in alphabetical order: the written order of the
    kinds, the phases' default, does not survive it."""
    spec = {k: v for k, v in PROVIDER["spec"].items() if k != "phases"}
    refused = definitions.provider_of("jsonserver", "team", _resource(spec), False)
    assert isinstance(refused, Refusal) and refused.reason == "ProviderInvalid"
    assert "spec.phases: required when there is more than one kind" in refused.message
    assert "e.g. phases: [[organizations], [people], [deals], [notes]]" in refused.message
    one = {**spec, "kinds": {"organizations": spec["kinds"]["organizations"]}}
    assert isinstance(definitions.provider_of("jsonserver", "team", _resource(one), False), dict)


def _run(provider: str, kinds: list[str]) -> contract.MigrationRun:
    body = yaml.safe_load(yaml.safe_dump(VALID))
    body["metadata"]["namespace"] = "team"
    body["spec"]["source"]["provider"] = provider
    body["spec"]["kinds"] = kinds
    return contract.parse_run(body, source="team/run")


def test_a_kind_the_built_in_provider_lacks_refuses_naming_its_kinds_and_the_fix() -> None:
    refused = definitions.kinds_of(_run("democrm", ["organizations", "tickets"]), None, False)
    assert isinstance(refused, Refusal) and refused.reason == "KindsInvalid"
    lines = refused.message.splitlines()
    assert lines[0] == (
        "spec.kinds: ['tickets'] not provided by 'democrm'; name only the provider's kinds, "
        "['deals', 'messages', 'organizations', 'people'] (or leave spec.kinds out for all)"
    )
    assert lines[1] == "spec.kinds is immutable: create a new MigrationRun with the kinds fixed"


def test_a_kind_a_migration_provider_lacks_refuses_naming_it_as_a_mend_too() -> None:
    provider = definitions.provider_of("jsonserver", "team", _resource(PROVIDER["spec"]), False)
    assert isinstance(provider, dict)
    refused = definitions.kinds_of(_run("jsonserver", ["tickets", "people"]), provider, True)
    assert isinstance(refused, Refusal) and refused.reason == "KindsInvalid"
    assert refused.message.startswith(
        "spec.kinds: ['tickets'] not provided by 'jsonserver'; name only the provider's kinds, "
        "['deals', 'notes', 'organizations', 'people']"
    )
    assert "or change MigrationProvider 'jsonserver' in namespace 'team'" in refused.message


def test_a_tree_kind_without_its_parent_refuses_naming_the_parent() -> None:
    refused = definitions.kinds_of(_run("democrm", ["messages"]), None, False)
    assert isinstance(refused, Refusal) and refused.reason == "KindsInvalid"
    assert "spec.kinds: 'messages' is walked from 'deals': add 'deals'" in refused.message


@pytest.mark.parametrize("kinds", [[], ["people", "organizations"], ["deals", "messages"]])
def test_kinds_the_provider_has_are_not_refused(kinds: list[str]) -> None:
    assert definitions.kinds_of(_run("democrm", kinds), None, False) is None


def test_a_provider_that_cannot_be_loaded_leaves_the_refusal_to_its_own_check() -> None:
    assert definitions.kinds_of(_run("nosuch", ["tickets"]), None, False) is None
