"""Tenancy on the real control plane, in the chart's topology (the operator under the chart's
RBAC with --all-namespaces, workers with no API rights and the installation's sealing key):
a run uses only its own namespace's Secret, a credential goes only to the hosts its Secret is
bound to, a workspace belongs to one namespace, a base URL outside the installation's
allow-list is refused (and so is a provider's OAuth2 token URL: bound and allowed like the
base URL), and a source's error text never carries a token into a status, an
Event, a log or a metric."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml
from listener import Listener, listening
from migration import check_against_truth
from net import free_port
from scrape import scrape
from tests.democrm.server_fixture import DemoCRM
from tests.k8s.operator_bench import Bench, eventually, run_manifest

from ferryman_worker import contract
from ferryman_worker.providers.democrm import PROVIDER_FILE

pytestmark = pytest.mark.k8s

DATA = {"seed": 11, "organizations": 120, "people": 60, "deals": 0}
KINDS = ["organizations", "people"]


@pytest.fixture
def intruder(world: Bench) -> Iterator[Bench]:
    """A second namespace served by the same operator and workers."""
    name = f"intruder-{uuid.uuid4().hex[:6]}"
    world.cp.kubectl("create", "namespace", name)
    yield dataclasses.replace(world, namespace=name)
    world.cp.kubectl("delete", "mrun", "--all", "-n", name, "--wait=false", check=False)
    world.cp.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _refusal(bench: Bench, name: str) -> dict[str, Any]:
    final = bench.wait_state(name, "Failed", timeout=60)
    return {c["type"]: c for c in final["conditions"]}["Admitted"]


def _nothing_of(token: str, listener: Listener) -> None:
    pieces = {token[i : i + 8] for i in range(len(token) - 7)}
    assert not [seen for seen in listener.received if any(p in seen for p in pieces)]


def test_an_intruder_gets_neither_a_tenants_token_nor_its_workspace(
    world: Bench, intruder: Bench, db_url: str
) -> None:
    with DemoCRM.start(**DATA) as crm, listening({"*": (200, {}, b"{}")}) as trap:
        crm_host = crm.url.rstrip("/")
        world.secret(crm.api_key, hosts=crm_host)  # tenant A's, bound to the CRM's http, host, port
        intruder.secret("intruders-own-key", name="own-token")
        world.operator()
        world.workers(2)

        # the intruder names A's Secret, pointed at its own listener: there is no such Secret
        # in its namespace, and the operator reads no other
        intruder.apply(run_manifest("steal", trap.url, workspace="loot"))
        missing = _refusal(intruder, "steal")
        assert missing["reason"] == "CredentialMissing"
        assert (
            f"no Secret 'democrm-token' in namespace '{intruder.namespace}'" in (missing["message"])
        )

        # within A's namespace, a run whose baseURL is not a host A's Secret is bound to
        world.apply(run_manifest("elsewhere", trap.url, workspace="acme-2"))
        unbound = _refusal(world, "elsewhere")
        assert unbound["reason"] == "CredentialNotBound"
        assert f"127.0.0.1:{trap.port} is not a host" in unbound["message"]
        assert f"ferryman.dev/hosts: {crm_host}" in unbound["message"]

        # A's own run, then the intruder (with its own, valid Secret) naming A's workspace
        world.apply(run_manifest("mine", crm.url, kinds=KINDS))
        world.wait_state("mine", "Succeeded", timeout=120)
        intruder.apply(
            run_manifest(
                "squat",
                crm.url,
                kinds=KINDS,
                source={
                    "provider": "democrm",
                    "baseURL": crm.url,
                    "credentialsSecretRef": {"name": "own-token"},
                },
            )
        )
        owned = _refusal(intruder, "squat")
        truth = crm.truth()
    assert trap.received == []
    _nothing_of(crm.api_key, trap)
    assert owned["reason"] == "WorkspaceOwned"
    assert f"belongs to namespace '{world.namespace}'" in owned["message"]
    check_against_truth(db_url, truth, kinds=tuple(KINDS))  # A's rows, exactly, and no other
    with contract.connect(db_url) as conn:
        names = sorted(p.name for p in contract.progress(conn))
    assert names == [f"{world.namespace}/mine"]  # no intruder run was ever admitted


def test_a_secret_without_a_host_binding_is_refused_with_how_to_bind_it(world: Bench) -> None:
    with DemoCRM.start(seed=12, organizations=10, people=0, deals=0) as crm:
        world.secret(crm.api_key, hosts=None)
        world.operator()
        world.apply(run_manifest("unbound", crm.url))
        refused = _refusal(world, "unbound")
    assert refused["reason"] == "CredentialNotBound"
    assert "is bound to no host" in refused["message"]
    assert f"kubectl annotate secret democrm-token -n {world.namespace}" in refused["message"]
    assert crm.api_key not in str(world.status("unbound"))


def test_a_base_url_outside_the_installations_allow_list_is_refused_naming_it(
    world: Bench, db_url: str
) -> None:
    with (
        DemoCRM.start(seed=13, organizations=10, people=0, deals=0) as crm,
        listening({"*": (200, {}, b"{}")}) as trap,
    ):
        world.secret(crm.api_key, hosts="http://127.0.0.1:*")  # both listeners' host, any port
        world.operator(FERRYMAN_OPERATOR_ALLOWED_SOURCE_URLS=f"https://*.example.com,{crm.url}")
        world.workers(1)
        world.apply(run_manifest("elsewhere", trap.url, workspace="acme-2"))
        world.apply(run_manifest("allowed", crm.url))
        refused = _refusal(world, "elsewhere")
        world.wait_state("allowed", "Succeeded", timeout=120)
    assert trap.received == []
    assert refused["reason"] == "SourceNotAllowed"
    assert (
        f"{trap.url} matches none of the installation's allowedSourceURLs" in (refused["message"])
    )
    assert f"(https://*.example.com, {crm.url})" in refused["message"]
    with contract.connect(db_url) as conn:
        names = sorted(p.name for p in contract.progress(conn))
    assert names == [f"{world.namespace}/allowed"]  # the refused run was never admitted


def _leaks(token: str, text: str) -> bool:
    """Whether ``text`` holds the token's first six characters or any eight of it."""
    pieces = {token[:6]} | {token[i : i + 8] for i in range(len(token) - 7)}
    return any(piece in text for piece in pieces)


def test_a_token_across_the_200th_character_of_an_error_body_shows_nowhere(
    world: Bench,
) -> None:
    token = f"Zq7-{uuid.uuid4().hex}"
    body = ("x" * 190 + token + " was refused").encode()  # the token straddles character 200
    operator_port, worker_port = free_port(), free_port()
    with listening({"*": (400, {"Content-Type": "text/plain"}, body)}) as source:
        world.secret(token, hosts=f"http://127.0.0.1:{source.port}")
        world.operator(FERRYMAN_OPERATOR_METRICS_PORT=str(operator_port))
        world.workers(1, ports=[worker_port])
        world.apply(run_manifest("refused", source.url))
        final = world.wait_state("refused", "Failed", timeout=120)
        events = world.cp.kubectl_json("get", "events", "-n", world.namespace)["items"]
        shown = {
            "status": json.dumps(world.get("refused")),
            "events": json.dumps(events),
            "metrics": scrape(operator_port)[0] + scrape(worker_port)[0],
        }
    shown["logs"] = "\n".join(process.output() for process in world.processes)
    assert source.received and all(token in seen for seen in source.received)  # its own host
    assert "HTTP 400 Bad Request" in json.dumps(final["conditions"])
    assert any(event["reason"] == "Failed" for event in events), [e["reason"] for e in events]
    assert sorted(where for where, text in shown.items() if _leaks(token, text)) == []
    assert "x" * 100 + "***" in shown["logs"]  # the source's words reach the log, redacted


OAUTH = {"client_id": "ferryman", "client_secret": "client-s3cret"}
FIRST_REFRESH_TOKEN = "rt-the-first-one"


def _oauth_provider(name: str, token_url: str) -> dict[str, Any]:
    """The demo CRM's provider as MigrationProvider ``name``, refresh-token auth at
    ``token_url``, its organizations and people."""
    document: dict[str, Any] = yaml.safe_load(PROVIDER_FILE.read_text())
    document["metadata"] = {"name": name}
    spec = document["spec"]
    spec["auth"] = {
        "style": "oauth2",
        "oauth2": {"grant": "refresh_token", "tokenUrl": token_url, "keys": {"refreshToken": "rt"}},
    }
    spec["kinds"] = {kind: spec["kinds"][kind] for kind in KINDS}
    spec["phases"] = [[kind] for kind in KINDS]
    return document


def _oauth_secret(bench: Bench, hosts: str) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "crm-oauth", "annotations": {"ferryman.dev/hosts": hosts}},
        "stringData": {**OAUTH, "rt": FIRST_REFRESH_TOKEN},
    }
    bench.apply(manifest)


def _oauth_run(name: str, url: str, provider: str, workspace: str, **ref: str) -> dict[str, Any]:
    source = {
        "provider": provider,
        "baseURL": url,
        "credentialsSecretRef": {"name": "crm-oauth", "key": "client_id", **ref},
    }
    return run_manifest(name, url, workspace=workspace, kinds=KINDS, source=source)


def test_a_token_url_is_held_to_the_secrets_binding_and_the_allow_list_like_the_base_url(
    world: Bench, db_url: str
) -> None:
    """The demo CRM in its OAuth mode, its token endpoint reached as ``localhost`` where its API
    is ``127.0.0.1``: a login host of its own. Refused while the Secret is bound to the API's
    host only (nothing sent), admitted once it is bound to both and retried; a token URL the
    allow-list does not allow is refused however the Secret is bound; a run binding its
    credential itself (tokenHost, `ferryman run`'s) is refused."""
    crm = DemoCRM.start(
        api_key=None,
        oauth_client_id=OAUTH["client_id"],
        oauth_client_secret=OAUTH["client_secret"],
        oauth_refresh_token=FIRST_REFRESH_TOKEN,
        **DATA,
    )
    with crm:
        port = crm.url.rsplit(":", 1)[1]
        login = f"http://localhost:{port}/oauth/token"
        _oauth_secret(world, "http://127.0.0.1:*")
        world.apply(_oauth_provider("crm", login))
        world.apply(_oauth_provider("far", "http://localhost:9/oauth/token"))
        allowed = f"http://127.0.0.1:*,http://localhost:{port}"
        world.operator(FERRYMAN_OPERATOR_ALLOWED_SOURCE_URLS=allowed)
        world.workers(2)
        world.apply(_oauth_run("login", crm.url, "crm", "acme"))
        world.apply(_oauth_run("far", crm.url, "far", "acme-2"))
        world.apply(_oauth_run("self-bound", crm.url, "crm", "acme-3", tokenHost="localhost"))
        unbound = _refusal(world, "login")
        far = _refusal(world, "far")
        self_bound = _refusal(world, "self-bound")
        before = dict(httpx.get(f"{crm.url}/_oauth").json())

        _oauth_secret(world, f"http://127.0.0.1:*,http://localhost:{port}")
        world.cp.kubectl("annotate", "mrun", "login", "-n", world.namespace, "ferryman.dev/retry=1")
        taken = lambda: world.status("login").get("lastRetry") == "1"  # noqa: E731
        eventually(taken, 30, "the retry to be taken")
        world.wait_state("login", "Succeeded", timeout=120)
        after, truth = dict(httpx.get(f"{crm.url}/_oauth").json()), crm.truth()

    assert unbound["reason"] == "CredentialNotBound"
    assert unbound["message"].startswith(
        f"spec.auth.oauth2.tokenUrl of provider 'crm': http://localhost:{port} is not a host"
        f" Secret 'crm-oauth' in namespace '{world.namespace}' is bound to (ferryman.dev/hosts: "
        "http://127.0.0.1:*)"
    )
    assert (
        f"kubectl annotate --overwrite secret crm-oauth -n {world.namespace} "
        f"ferryman.dev/hosts=http://127.0.0.1:*,http://localhost:{port}`"
    ) in unbound["message"]
    assert far["reason"] == "SourceNotAllowed"
    assert far["message"].startswith(
        "spec.auth.oauth2.tokenUrl of provider 'far': http://localhost:9/oauth/token matches "
        f"none of the installation's allowedSourceURLs ({allowed.replace(',', ', ')})"
    )
    assert self_bound["reason"] == "InvalidSpec"
    assert self_bound["message"].startswith(
        "spec.source.credentialsSecretRef.tokenHost: 'localhost' is read by `ferryman run` only"
    )
    assert before["refresh_token"] == 0 and before["calls"] == {}, before  # nothing was sent
    assert after["refresh_token"] == 1 and after["refused"] == 0, after
    check_against_truth(db_url, truth, kinds=tuple(KINDS))
    with contract.connect(db_url) as conn:
        names = sorted(p.name for p in contract.progress(conn))
    assert names == [f"{world.namespace}/login"]  # the others were never admitted


def test_a_run_naming_the_installations_own_secret_is_refused_and_nothing_is_sent(
    world: Bench,
) -> None:
    """The chart's database Secret lives in the release's namespace, which the operator's
    cluster-wide grant covers; a run there naming it (bound to the intruder's listener, as whoever
    may create Secrets' annotations there could) must not have it read and sent."""
    database_url = "postgresql://ferryman:db-passw0rd@db.internal/ferryman"
    with listening({"*": (200, {}, b'{"data": [], "more": false}')}) as trap:
        world.secret(database_url, name="ferryman-database", hosts=trap.url)
        own = f"{world.namespace}/ferryman-database,{world.namespace}/ferryman-sealing-key"
        world.operator(FERRYMAN_OPERATOR_PROTECTED_SECRETS=own)
        world.workers(1)
        manifest = run_manifest("steal-db", trap.url)
        manifest["spec"]["source"]["credentialsSecretRef"]["name"] = "ferryman-database"
        world.apply(manifest)
        refused = _refusal(world, "steal-db")
    assert trap.received == []
    assert refused["reason"] == "CredentialForbidden"
    assert (
        f"Secret 'ferryman-database' in namespace '{world.namespace}' is one of the"
        in (refused["message"])
    )
    assert "db-passw0rd" not in json.dumps(world.get("steal-db"))


def test_a_mapping_into_ferrymans_tables_or_another_workspace_is_refused_at_admission(
    world: Bench, intruder: Bench
) -> None:
    """The operator's admission holds every MigrationMapping to the installation's destinations
    and to the run's own workspace: nothing is admitted, so no worker writes anything."""
    intruder.secret("intruders-own-key")
    world.operator()
    columns = {"name": {"field": "/name"}, "workspace": {"value": "acme"}}
    mappings = {
        "runs": {"organizations": {"table": "ferryman_runs", "columns": columns}},
        "planted": {
            "organizations": {
                "table": "crm_organizations",
                "workspaceColumn": "workspace",
                "columns": {**columns, "source_id": {"field": "/id"}},
            }
        },
    }
    for name, kinds in mappings.items():
        intruder.apply(
            {
                "apiVersion": "ferryman.dev/v1alpha1",
                "kind": "MigrationMapping",
                "metadata": {"name": name},
                "spec": {"provider": "democrm", "kinds": kinds},
            }
        )
        intruder.apply(
            run_manifest(
                name,
                "http://127.0.0.1:1",
                workspace=f"loot-{name}",
                kinds=["organizations"],
                mapping={"name": name},
            )
        )
    into_runs = _refusal(intruder, "runs")
    assert into_runs["reason"] == "MappingInvalid"
    assert (
        "kinds.organizations.table: public.ferryman_runs is one of ferryman's own"
        in (into_runs["message"])
    )
    planted = _refusal(intruder, "planted")
    assert planted["reason"] == "MappingInvalid"
    assert (
        "kinds.organizations: columns.workspace: the workspace column is mapped"
        in (planted["message"])
    )
