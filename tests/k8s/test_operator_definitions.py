"""MigrationProvider and MigrationMapping on the real control plane, in the chart's topology (the
operator under the chart's RBAC, workers without API rights): a run names a provider and a
mapping of its namespace, the operator checks both (the mapping against the database's catalog)
and snapshots them into the run at admission, and the workers import json-server's records into
the example application's tables from that snapshot alone; what a run names that is missing or
does not fit refuses it, naming the fix."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from migration import landed_once
from source_servers import StartServer, start_json_server, start_pocketbase
from tests.k8s.operator_bench import Bench, eventually, run_manifest

from ferryman_worker import contract
from ferryman_worker.db import connect

pytestmark = pytest.mark.k8s
__all__ = ["start_json_server", "start_pocketbase"]  # the fixtures

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROVIDER = yaml.safe_load((EXAMPLES / "sources/json-server/provider.yaml").read_text())
MAPPING = yaml.safe_load((EXAMPLES / "apps/sales/migrationmapping.yaml").read_text())
RUN = yaml.safe_load((EXAMPLES / "sources/json-server/migrationrun.yaml").read_text())
SCHEMA = (EXAMPLES / "apps/sales/schema.sql").read_text()
TABLES = {
    "organizations": "sales.companies",
    "people": "sales.contacts",
    "deals": "sales.deals",
    "notes": "sales.notes",
}
NOWHERE = "http://127.0.0.1:9"


def _run(name: str, url: str, **spec: Any) -> dict[str, Any]:
    """examples/sources/json-server/migrationrun.yaml, named ``name``, at ``url``."""
    document = copy.deepcopy(RUN)
    document["metadata"]["name"] = name
    document["spec"]["source"]["baseURL"] = url
    document["spec"].update(spec)
    return {**document, "spec": {k: v for k, v in document["spec"].items() if v is not None}}


def _refusal(bench: Bench, name: str) -> dict[str, Any]:
    final = bench.wait_state(name, "Failed", timeout=60)
    found: dict[str, Any] = {c["type"]: c for c in final["conditions"]}["Admitted"]
    return found


def _kubectl_patch(bench: Bench, what: str, patch: list[dict[str, Any]]) -> None:
    bench.cp.kubectl("patch", what, "-n", bench.namespace, "--type=json", "-p", json.dumps(patch))


def test_a_run_writes_the_sources_records_into_the_app_from_the_snapshot_it_was_admitted_with(
    world: Bench, start_json_server: StartServer, db_url: str
) -> None:
    """Admitted suspended; then its MigrationProvider is broken and its MigrationMapping deleted;
    resumed, it still imports every record as admitted: the workers read only the snapshot."""
    server = start_json_server(organizations=30)
    with connect.connect(db_url) as conn:
        conn.execute(SCHEMA)  # the application's own migration
    world.secret("unused", name="jsonserver", hosts="http://127.0.0.1:*")
    world.apply(PROVIDER)
    world.apply(MAPPING)
    world.operator()
    world.apply(_run("sales", server.url, suspend=True))
    key = f"{world.namespace}/sales"

    def admitted() -> bool:
        with contract.connect(db_url) as conn:
            return bool(contract.progress(conn, key))

    eventually(admitted, 60, "the run to be admitted")
    broken = [{"op": "replace", "path": "/spec/kinds/organizations/request/path", "value": "/x"}]
    _kubectl_patch(world, "migrationprovider/jsonserver", broken)
    world.cp.kubectl("delete", "migrationmapping", "sales", "-n", world.namespace)
    world.cp.kubectl(
        "patch", "mrun", "sales", "-n", world.namespace, "--type=merge",
        "-p", '{"spec": {"suspend": false}}',
    )  # fmt: skip
    world.workers(2)
    final = world.wait_state("sales", "Succeeded", timeout=240)

    with connect.connect(db_url) as conn:
        written = {
            kind: conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"]  # type: ignore[index]
            for kind, table in TABLES.items()
        }
        ledger = {
            row["kind"]: row["n"]
            for row in conn.execute("SELECT kind, count(*) AS n FROM ferryman_ledger GROUP BY kind")
        }
        landed = conn.execute("SELECT count(*) AS n FROM ferryman_landing").fetchone()
        run = conn.execute("SELECT provider_definition, mapping FROM ferryman_runs").fetchone()
    assert written == ledger == server.counts  # json-server's own X-Total-Count per collection
    assert final["rowsWritten"] == sum(server.counts.values())
    assert landed == {"n": 0}
    assert run is not None
    assert run["provider_definition"]["spec"]["kinds"]["organizations"]["request"]["path"] == (
        "/organizations"
    )
    assert run["mapping"]["mapping"]["kinds"]["people"]["table"] == "sales.contacts"


def test_what_a_run_names_must_exist_in_its_namespace_and_fit(world: Bench) -> None:
    """Each refusal names what is missing or wrong and how to fix it; nothing is admitted."""
    world.secret("unused", name="jsonserver", hosts="http://127.0.0.1:*")
    world.operator()
    source = {**RUN["spec"]["source"], "baseURL": NOWHERE}
    world.apply(
        _run("no-provider", NOWHERE, workspace="w1", source={**source, "provider": "nosuch"})
    )
    world.apply(PROVIDER)
    world.apply(_run("no-mapping", NOWHERE, workspace="w2", mapping={"name": "nosuch"}))
    world.apply(MAPPING)  # its tables do not exist in this database
    world.apply(_run("no-tables", NOWHERE, workspace="w3"))
    invalid = copy.deepcopy(PROVIDER)  # the API server's schema accepts it; the model does not
    invalid["metadata"]["name"] = "invalid"
    invalid["spec"]["kinds"]["people"]["walk"] = "tree"
    invalid["spec"]["kinds"]["notes"]["id"] = "missing"
    world.apply(invalid)
    world.apply(
        _run(
            "bad-provider",
            NOWHERE,
            workspace="w4",
            mapping=None,
            source={**source, "provider": "invalid"},
        )
    )
    world.apply(_run("a-file", NOWHERE, workspace="w5", mapping={"file": "mapping.yaml"}))

    missing = _refusal(world, "no-provider")
    assert missing["reason"] == "ProviderNotFound"
    assert (
        f"no MigrationProvider 'nosuch' in namespace '{world.namespace}' and no built-in "
        "provider 'nosuch'"
    ) in missing["message"]
    unmapped = _refusal(world, "no-mapping")
    assert unmapped["reason"] == "MappingNotFound"
    assert f"no MigrationMapping 'nosuch' in namespace '{world.namespace}'" in unmapped["message"]
    tables = _refusal(world, "no-tables")
    assert tables["reason"] == "MappingInvalid"
    lines = tables["message"].splitlines()
    assert lines[0].startswith("spec.mapping.name: MigrationMapping 'sales' in namespace")
    assert "  kinds.organizations.table: there is no table sales.companies" in "\n".join(lines)
    assert len([line for line in lines if line.startswith("  kinds.")]) == 4  # one per kind
    invalid_provider = _refusal(world, "bad-provider")
    assert invalid_provider["reason"] == "ProviderInvalid"
    assert "2 problem(s):" in invalid_provider["message"]
    assert "  spec.kinds.people: a tree kind needs `parent`" in invalid_provider["message"]
    a_file = _refusal(world, "a-file")
    assert a_file["reason"] == "InvalidSpec"
    assert "spec.mapping.file: 'mapping.yaml' is read by `ferryman run` only" in a_file["message"]
    assert "spec.mapping.name" in a_file["message"]
    with contract.connect(world.db_url) as conn:
        assert contract.progress(conn) == []


def test_a_run_naming_a_kind_its_provider_lacks_is_refused_before_it_waits(world: Bench) -> None:
    """A built-in provider's run, behind a queued run of its workspace, and a MigrationProvider's
    run: each refused at once (Failed, its Admitted condition and a Warning Event naming
    spec.kinds, the unknown kind, the provider's kinds and the fix), nothing admitted for them;
    the MigrationProvider given the kind, its run is admitted without being retried."""
    world.secret("unused")
    world.secret("unused", name="jsonserver", hosts="http://127.0.0.1:*")
    world.apply(PROVIDER)
    world.operator()
    orgs = ["organizations"]
    world.apply(run_manifest("live", NOWHERE, workspace="w1", kinds=orgs, suspend=True))
    world.wait_state("live", "Running")
    world.apply(run_manifest("queued", NOWHERE, workspace="w1", kinds=orgs))
    world.wait_state("queued", "Queued")
    unknown = ["organizations", "tickets"]
    world.apply(run_manifest("unknown-builtin", NOWHERE, workspace="w1", kinds=unknown))
    world.apply(_run("unknown-declared", NOWHERE, workspace="w2", mapping=None, kinds=unknown))

    for name, provider, kinds, fix in (
        ("unknown-builtin", "democrm", "['deals', 'messages', 'organizations', 'people']", ""),
        (
            "unknown-declared",
            "jsonserver",
            "['deals', 'notes', 'organizations', 'people']",
            f"or change MigrationProvider 'jsonserver' in namespace '{world.namespace}'",
        ),
    ):
        refused = _refusal(world, name)
        assert refused["reason"] == "KindsInvalid", refused
        message = refused["message"]
        assert f"spec.kinds: ['tickets'] not provided by {provider!r}" in message
        assert f"name only the provider's kinds, {kinds}" in message
        assert "spec.kinds is immutable: create a new MigrationRun" in message
        assert fix in message
        said = [e for e in world.events(name) if e["reason"] == "Refused"]
        assert [e["type"] for e in said] == ["Warning"], said
        assert said[0]["message"].startswith("spec.kinds: ['tickets']")
    with contract.connect(world.db_url) as conn:
        assert [run.name for run in contract.progress(conn)] == [f"{world.namespace}/live"]
    assert world.status("queued")["state"] == "Queued"

    tickets = {**PROVIDER["spec"]["kinds"]["organizations"], "request": {"path": "/tickets"}}
    phases = [*PROVIDER["spec"]["phases"], ["tickets"]]
    mended = [
        {"op": "add", "path": "/spec/kinds/tickets", "value": tickets},
        {"op": "replace", "path": "/spec/phases", "value": phases},
    ]
    _kubectl_patch(world, "migrationprovider/jsonserver", mended)
    admitted = lambda: _admitted(world, "unknown-declared")["status"] == "True"  # noqa: E731
    eventually(admitted, 60, "the run to be admitted once its provider has the kind")
    assert "lastRetry" not in world.status("unknown-declared")


def _admitted(bench: Bench, name: str) -> dict[str, Any]:
    found: dict[str, Any] = {c["type"]: c for c in bench.status(name)["conditions"]}["Admitted"]
    return found


def test_a_run_refused_for_what_it_names_is_admitted_once_each_exists(
    world: Bench, start_json_server: StartServer, db_url: str
) -> None:
    """Applied before its MigrationProvider and its MigrationMapping: refused for the provider;
    the provider created, refused for the mapping; the mapping created, admitted and imports
    every record. The same object throughout: never re-created, never retried by hand."""
    server = start_json_server(organizations=30)
    with connect.connect(db_url) as conn:
        conn.execute(SCHEMA)  # the application's own migration
    world.secret("unused", name="jsonserver", hosts="http://127.0.0.1:*")
    world.operator()
    world.workers(2)
    world.apply(_run("early", server.url))
    uid = world.get("early")["metadata"]["uid"]
    assert _refusal(world, "early")["reason"] == "ProviderNotFound"

    world.apply(PROVIDER)
    reason = lambda: _admitted(world, "early")["reason"] == "MappingNotFound"  # noqa: E731
    eventually(reason, 60, "the run to be refused for its mapping next")
    assert world.status("early")["state"] == "Failed"
    world.apply(MAPPING)
    admitted = lambda: _admitted(world, "early")["status"] == "True"  # noqa: E731
    eventually(admitted, 60, "the run to be admitted once its mapping exists")
    final = world.wait_state("early", "Succeeded", timeout=240)

    with connect.connect(db_url) as conn:
        ledger = {
            row["kind"]: row["n"]
            for row in conn.execute("SELECT kind, count(*) AS n FROM ferryman_ledger GROUP BY kind")
        }
    assert ledger == server.counts  # json-server's own X-Total-Count per collection
    assert final["rowsWritten"] == sum(server.counts.values())
    assert world.get("early")["metadata"]["uid"] == uid and "lastRetry" not in final
    said = world.reasons("early")
    assert "Refused" in said and "Admitted" in said and "Retried" not in said, said


def test_the_api_server_refuses_a_mapping_reference_with_neither_or_both(world: Bench) -> None:
    for mapping in ({}, {"file": "m.yaml", "name": "m"}):
        refused = world.apply(_run("either", NOWHERE, mapping=mapping), check=False)
        assert refused.returncode != 0
        assert "give exactly one of file" in refused.stderr


def test_the_examples_definitions_survive_the_api_servers_defaulting_and_pruning(
    world: Bench,
) -> None:
    """Each example provider and the sales mapping, applied and read back, is what its file
    says (to the model): nothing the model knows is pruned, no default changes its meaning."""
    documents = [
        yaml.safe_load((EXAMPLES / f"sources/{source}/provider.yaml").read_text())
        for source in ("json-server", "pocketbase")
    ]
    for document in documents:
        world.apply(document)
        name = document["metadata"]["name"]
        back = world.cp.kubectl_json("get", "migrationprovider", name, "-n", world.namespace)
        assert contract.provider_definition(name, back["spec"], name) == (
            contract.provider_definition(name, document["spec"], name)
        )
    world.apply(MAPPING)
    back = world.cp.kubectl_json("get", "migrationmapping", "sales", "-n", world.namespace)
    assert contract.mapping_document(back["spec"], "back") == (
        contract.mapping_document(MAPPING["spec"], "file")
    )
    shown = world.cp.kubectl("get", "mprov,mmap", "-n", world.namespace).stdout
    assert "jsonserver" in shown and "pocketbase" in shown and "sales" in shown
    # a map of the MigrationRun keeps its entries too (the API server prunes what a map without
    # a value schema holds)
    source = {**RUN["spec"]["source"], "options": {"version": "2026-01"}}
    world.apply(_run("kept", NOWHERE, source=source))
    assert world.get("kept")["spec"]["source"]["options"] == {"version": "2026-01"}


def test_the_pocketbase_example_runs_through_the_operator_with_its_migration_provider(
    world: Bench, start_pocketbase: StartServer, db_url: str
) -> None:
    """examples/sources/pocketbase applied as a user would (its provider a MigrationProvider, its
    run as is, no mapping: the landing table): every record PocketBase counts, written once."""
    server = start_pocketbase(organizations=20)
    token = server.tokens["user"]
    world.secret(token, name="pocketbase", hosts="http://127.0.0.1:*")
    world.apply(yaml.safe_load((EXAMPLES / "sources/pocketbase/provider.yaml").read_text()))
    run = yaml.safe_load((EXAMPLES / "sources/pocketbase/run.yaml").read_text())
    run["metadata"] = {"name": run["metadata"]["name"]}  # the test's namespace, not default
    run["spec"]["source"]["baseURL"] = server.url
    world.operator()
    world.workers(2)
    world.apply(run)
    final = world.wait_state(run["metadata"]["name"], "Succeeded", timeout=300)
    landed_once(db_url, "pocketbase", server.counts)  # PocketBase's own totalItems
    assert final["rowsWritten"] == sum(server.counts.values())
    assert token not in json.dumps(world.get(run["metadata"]["name"]))
