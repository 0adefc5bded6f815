"""The Kubernetes API as a source (examples/sources/kubernetes): the ConfigMaps of a namespace,
listed in chunks and followed by the API server's opaque continue tokens, land exactly once; a
continue token that an etcd compaction expired mid-walk (410 Gone) begins the walk again at its
first page, and the ledger writes once what is listed twice; an API server that serves one read
at a time (`--max-requests-inflight=1`) answers 429 with Retry-After, and the run waits and
loses nothing. A real API server, real etcd, real tokens."""

from __future__ import annotations

import base64
import contextlib
import json
import pathlib
import ssl
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml
from migration import (
    engine_worker,
    extra_claims,
    landed_once,
    options,
    sigkill_mid_run,
    start_run,
    state,
    wait_finished,
)
from net import wait_for
from runfiles import ferryman_run
from scrape import parse, total
from tests.k8s.conftest import ControlPlane, controlplane_command
from tests.k8s.operator_bench import Bench, eventually, table
from workers import Subprocess, scalar

from ferryman_worker.db import connect
from ferryman_worker.engine import runs
from ferryman_worker.engine.runtime import credential_env_var
from ferryman_worker.providers import declarative

pytestmark = pytest.mark.k8s
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sources" / "kubernetes"
WORKSPACE, KIND = "kubernetes", "configmaps"
CONFIGMAPS = 120
PAGE = 10
PACE = {"tokens_per_second": 2.0, "burst": 1}
"""Two listings a second: the walk is still on its early pages when it is suspended."""
LIMITED = (
    "--enable-priority-and-fairness=false",  # the plain in-flight limiter: 429 at once, no queue
    "--max-requests-inflight=1",
    "--max-mutating-requests-inflight=1",
)
UNREACHED = str(10**15)
"""A resourceVersion far beyond etcd's revision: a read at it waits for the watch cache to
reach it (3 s), then gives up."""


def _configmaps(plane: ControlPlane, namespace: str) -> int:
    """`CONFIGMAPS` ConfigMaps in `namespace`, besides kube-root-ca.crt (the controller
    manager publishes it in every namespace, a moment after it is created: the walk must find
    it there); how many there are in all."""
    items = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"settings-{n:03d}"},
         "data": {"n": str(n)}}
        for n in range(CONFIGMAPS)
    ]  # fmt: skip
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    plane.kubectl("apply", "-n", namespace, "-f", "-", input=listed)
    wait_for(lambda: _has(plane, namespace, "kube-root-ca.crt"), 60, "kube-root-ca.crt")
    return CONFIGMAPS + 1


def _has(plane: ControlPlane, namespace: str, name: str) -> bool:
    found = plane.kubectl("get", "configmap", name, "-n", namespace, check=False)
    return found.returncode == 0


def _reader_token(plane: ControlPlane, namespace: str) -> str:
    """A token of a service account that may only list the namespace's ConfigMaps."""
    plane.kubectl("create", "serviceaccount", "reader", "-n", namespace)
    plane.kubectl("create", "role", "reader", "-n", namespace, "--verb=list",
                  "--resource=configmaps")  # fmt: skip
    plane.kubectl("create", "rolebinding", "reader", "-n", namespace, "--role=reader",
                  f"--serviceaccount={namespace}:reader")  # fmt: skip
    return plane.kubectl("create", "token", "reader", "-n", namespace).stdout.strip()


def _trust(plane: ControlPlane, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers of this process, and the processes it starts, trust the API server's CA (httpx
    reads SSL_CERT_FILE)."""
    monkeypatch.setenv("SSL_CERT_FILE", str(plane.state_dir / "pki" / "ca.crt"))


def _counted(plane: ControlPlane, namespace: str) -> int:
    """How many ConfigMaps the API server itself lists in `namespace`."""
    return len(plane.kubectl_json("get", "configmaps", "-n", namespace)["items"])


def _example_run(server: str, namespace: str) -> dict[str, Any]:
    """examples/sources/kubernetes/run.yaml against `server`, listing `namespace`."""
    run: dict[str, Any] = yaml.safe_load((EXAMPLE / "run.yaml").read_text())
    run["spec"]["source"]["baseURL"] = server
    run["spec"]["source"]["options"] = {"namespace": namespace}
    return run


def _admin(plane: ControlPlane) -> httpx.Client:
    """An HTTP client with the control plane's admin certificate (group system:masters)."""
    pki = plane.state_dir / "pki"
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
    return httpx.Client(verify=context, timeout=30)


def _run(
    plane: ControlPlane,
    server: str,
    namespace: str,
    token: str,
    monkeypatch: pytest.MonkeyPatch,
    **changes: Any,
) -> runs.RunRequest:
    """The example's run against `server`, as the service account of `token`, its options
    changed by `changes`."""
    monkeypatch.setenv(credential_env_var("kubernetes", "token"), token)
    _trust(plane, monkeypatch)
    return runs.RunRequest(
        name="kubernetes-configmaps",
        workspace="kubernetes",
        provider="kubernetes",
        base_url=server,
        credential={"name": "kubernetes", "key": "token"},
        kinds=[],
        options=options(**{"page_size": PAGE, "rate_limit": PACE, **changes}),
        source_options={"namespace": namespace},
        provider_definition=declarative.load_file(EXAMPLE / "provider.yaml").definition(),
    )


# -- the example, as a user runs it --------------------------------------------------------------


def test_ferryman_run_of_the_example_lands_every_configmap_once(
    controlplane: ControlPlane,
    namespace: str,
    db_url: str,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`ferryman run run.yaml --provider-file provider.yaml`, as examples/sources/kubernetes
    says, as a service account that may only list the namespace's ConfigMaps."""
    plane = controlplane
    _configmaps(plane, namespace)
    token = _reader_token(plane, namespace)
    _trust(plane, monkeypatch)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(_example_run(plane.server, namespace)))
    out = ferryman_run(path, EXAMPLE / "provider.yaml", db_url, "kubernetes", token)
    assert "Succeeded" in out and token not in out
    landed_once(db_url, WORKSPACE, {KIND: _counted(plane, namespace)})


def test_the_example_runs_through_the_operator_with_its_migration_provider(
    controlplane: ControlPlane,
    world: Bench,
    namespace: str,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The example applied as a user would: its provider a MigrationProvider and the service
    account's token a Secret bound to the API server's host, in the run's namespace; the
    operator admits the run and two `ferryman worker` processes list the namespace."""
    plane = controlplane
    _configmaps(plane, namespace)
    token = _reader_token(plane, namespace)
    _trust(plane, monkeypatch)
    world.secret(token, name="kubernetes", hosts="127.0.0.1:*")  # https, the API server's port
    world.apply(yaml.safe_load((EXAMPLE / "provider.yaml").read_text()))
    run = _example_run(plane.server, namespace)
    run["metadata"] = {"name": run["metadata"]["name"]}  # the test's namespace, not default
    world.operator()
    world.workers(2)
    world.apply(run)
    final = world.wait_state(run["metadata"]["name"], "Succeeded", timeout=300)
    counted = _counted(plane, namespace)
    landed_once(db_url, WORKSPACE, {KIND: counted})
    assert final["rowsWritten"] == counted
    assert token not in json.dumps(world.get(run["metadata"]["name"]))
    # every chunk but the last said how many ConfigMaps follow it: the listing is reconciled
    [verdict] = final["verdicts"]
    assert (verdict["kind"], verdict["verdict"]) == (KIND, "reconciled")
    assert verdict["listed"] == verdict["total"] == counted and "shortBy" not in verdict
    complete = _condition(final, "Complete")
    assert (complete["status"], complete["reason"]) == ("True", "Reconciled")
    [row] = table(world, "-o", "wide")
    assert (row["COMPLETE"], row["VERDICTS"]) == ("True", "reconciled")


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status.get("conditions", []) if c["type"] == kind)


def _through_operator(
    world: Bench,
    plane: ControlPlane,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    provider: dict[str, Any] | None = None,
    secret: dict[str, str] | None = None,
    workers: int = 1,
) -> str:
    """The example applied through the operator, its MigrationProvider ``provider`` (default:
    the example's) and its Secret's data ``secret`` (default: the reader's token), pages of
    ten; returns the run's name."""
    _configmaps(plane, namespace)
    _trust(plane, monkeypatch)
    data = secret if secret is not None else {"token": _reader_token(plane, namespace)}
    manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "kubernetes",
            "namespace": namespace,
            "annotations": {"ferryman.dev/hosts": "127.0.0.1:*"},
        },
        "stringData": data,
    }
    plane.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    world.apply(provider or yaml.safe_load((EXAMPLE / "provider.yaml").read_text()))
    run = _example_run(plane.server, namespace)
    run["metadata"] = {"name": run["metadata"]["name"]}
    run["spec"]["options"]["pageSize"] = PAGE
    run["spec"]["source"]["credentialsSecretRef"]["key"] = next(iter(data))
    world.operator()
    world.workers(workers)
    world.apply(run)
    return str(run["metadata"]["name"])


def _provider(**changes: Any) -> dict[str, Any]:
    """The example's MigrationProvider, its spec's top-level keys and its kind's pagination's
    stop rules changed (``stop``)."""
    provider: dict[str, Any] = yaml.safe_load((EXAMPLE / "provider.yaml").read_text())
    stop = changes.pop("stop", {})
    provider["spec"].update(changes)
    provider["spec"]["kinds"][KIND]["pagination"].setdefault("stop", {}).update(stop)
    return provider


def test_a_walk_stopped_early_is_short_on_the_run_and_it_is_not_complete(
    controlplane: ControlPlane, world: Bench, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop rule that ends the walk after two chunks of ten (maxPages: 2): the chunks said how
    many ConfigMaps followed them, so the run fails as short, and its status says by how many
    and what to fix."""
    plane = controlplane
    name = _through_operator(world, plane, namespace, monkeypatch, _provider(stop={"maxPages": 2}))
    final = world.wait_state(name, "Failed", timeout=300)
    counted = _counted(plane, namespace)
    [verdict] = final["verdicts"]
    assert verdict["verdict"] == "short" and verdict["listed"] == 2 * PAGE
    assert verdict["total"] == counted and verdict["shortBy"] == counted - 2 * PAGE
    assert "stop.maxPages" in verdict["note"]
    complete = _condition(final, "Complete")
    assert (complete["status"], complete["reason"]) == ("False", "Short")
    assert f"listed {2 * PAGE} of the {counted}" in complete["message"]
    [row] = table(world)
    assert (row["STATE"], row["COMPLETE"]) == ("Failed", "False")


def test_a_source_refusing_the_token_fails_the_run_naming_the_cause(
    controlplane: ControlPlane, world: Bench, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server answers 401 to a token it did not issue: the run fails at its first
    answer, its Failed condition and REASON column name the cause, and never the token."""
    token = f"not-a-token-{uuid.uuid4().hex}"
    name = _through_operator(world, controlplane, namespace, monkeypatch, secret={"token": token})
    final = world.wait_state(name, "Failed", timeout=300)
    failed = _condition(final, "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "SourceRefused")
    assert "HTTP 401" in final["message"] and final["reason"] == "SourceRefused"
    [row] = table(world)
    assert (row["STATE"], row["REASON"]) == ("Failed", "SourceRefused")
    assert token not in json.dumps(world.get(name))


def test_a_secret_without_a_key_the_providers_auth_reads_is_refused_at_admission(
    controlplane: ControlPlane, world: Bench, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider whose auth is basic, a Secret with a username and no password: the operator
    refuses the run before any task (CredentialMissing, naming the key and where to add it, never
    the username); once the Secret has its password, a retry admits it, and the API server,
    which takes no basic credentials, forbids their anonymous user at the first answer."""
    user = f"user-{uuid.uuid4().hex}"
    name = _through_operator(
        world,
        controlplane,
        namespace,
        monkeypatch,
        _provider(auth={"style": "basic"}),
        secret={"username": user},
    )
    refused = world.wait_state(name, "Failed", timeout=120)
    admitted = _condition(refused, "Admitted")
    assert (admitted["status"], admitted["reason"]) == ("False", "CredentialMissing")
    assert "['password']" in admitted["message"] and "spec.auth" in admitted["message"]
    assert "rowsWritten" not in refused or refused["rowsWritten"] == 0
    assert user not in json.dumps(world.get(name))

    controlplane.kubectl(
        "patch", "secret", "kubernetes", "-n", namespace, "--type", "merge",
        "-p", json.dumps({"stringData": {"password": uuid.uuid4().hex}}),
    )  # fmt: skip
    controlplane.kubectl("annotate", "mrun", name, "-n", namespace, "ferryman.dev/retry=1")

    def refused_by_the_source() -> dict[str, Any] | None:
        found = world.status(name)
        return found if found.get("reason") == "SourceRefused" else None

    final = eventually(refused_by_the_source, 300, "the retried run refused by the API server")
    assert _condition(final, "Admitted")["status"] == "True"
    assert "HTTP 403" in final["message"] and user not in json.dumps(world.get(name))


def test_three_sigkills_mid_walk_lose_and_double_nothing(
    controlplane: ControlPlane, namespace: str, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One `ferryman worker` process at a time walks the continue tokens in pages of 100,
    each written in windows of 2; at a fifth, two fifths and three fifths of the ConfigMaps
    (inside the first page, as it is being written) it is SIGKILLed and another started, which
    goes on from the token and the offset inside the page that the last window committed:
    nothing is listed twice unless the API server expired the token meanwhile (it compacts
    etcd every 5 minutes), when the walk begins again."""
    plane = controlplane
    _configmaps(plane, namespace)
    counted = _counted(plane, namespace)
    token = _reader_token(plane, namespace)
    run = _run(plane, plane.server, namespace, token, monkeypatch, page_size=100, window_size=2)
    run_id = start_run(db_url, run)
    start = lambda: Subprocess(db_url, "migrations:1")  # noqa: E731
    final = sigkill_mid_run(db_url, run_id, counted, start, workers=1)
    assert final["state"] == "succeeded", final["error"]
    landed_once(db_url, WORKSPACE, {KIND: counted})
    assert final["rows_written"] == counted  # each ConfigMap written once
    if _restarts(db_url, run_id) == 0:
        assert final["rows_skipped"] == 0  # resumed where it was, not from the start
    assert extra_claims(db_url, run_id) <= 3  # a kill costs the task it held one claim


def _restarts(db_url: str, run_id: int) -> int:
    """How often the run's walk began again at its first page (a token the server expired)."""
    query = (
        "SELECT coalesce(max((cursor->>'restarts')::int), 0) FROM ferryman_tasks WHERE run_id = %s"
    )
    return int(scalar(db_url, query, (run_id,)))


# -- an expired continue token ----------------------------------------------------------------


def _etcd(plane: ControlPlane, call: str, body: dict[str, Any]) -> dict[str, Any]:
    """A call to etcd's v3 JSON gateway (keys and values base64)."""
    etcd = json.loads((plane.state_dir / "state.json").read_text())["etcd"]
    answer = httpx.post(f"{etcd}/v3/kv/{call}", json=body, timeout=30).raise_for_status()
    found: dict[str, Any] = answer.json()
    return found


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _compact(plane: ControlPlane, namespace: str) -> int:
    """Expire every continue token given so far, as the API server's own compaction does
    (every --etcd-compaction-interval, 5 minutes by default): a write first (a token names the
    revision of its list, and etcd keeps the revision it compacts at, so the compaction must be
    at a later one), then etcd compacted at its current revision, which is recorded in etcd's
    key `compact_rev_key`: every API server watches that key, and its watch cache, which serves
    a list with a continue token while it keeps that revision, lets go of the older ones within
    15 s. From then on such a list goes to etcd, which answers that it was compacted: 410 Gone.
    (etcd compacted behind the API server's back, without the key, leaves the watch cache
    serving the old tokens.) Returns the revision."""
    mark = f"ferryman.dev/compacted={uuid.uuid4().hex}"
    plane.kubectl("annotate", "namespace", namespace, mark, "--overwrite")
    now = _etcd(plane, "range", {"key": _b64("compact_rev_key")})
    revision = int(now["header"]["revision"])
    _etcd(plane, "compaction", {"revision": str(revision), "physical": True})
    _etcd(plane, "put", {"key": _b64("compact_rev_key"), "value": _b64(str(revision))})
    return revision


def _first_chunk_token(admin: httpx.Client, server: str, namespace: str) -> str:
    listed = admin.get(f"{server}/api/v1/namespaces/{namespace}/configmaps", params={"limit": 1})
    token: str = listed.raise_for_status().json()["metadata"]["continue"]
    assert token
    return token


def _expired(admin: httpx.Client, server: str, namespace: str, token: str) -> bool:
    """Whether the API server answers `token` 410 Gone."""
    params: dict[str, str | int] = {"limit": 1, "continue": token}
    answer = admin.get(f"{server}/api/v1/namespaces/{namespace}/configmaps", params=params)
    if answer.status_code != 410:
        answer.raise_for_status()
        return False
    assert "continue parameter is too old" in answer.json()["message"]
    return True


def test_configmaps_land_once_and_an_expired_continue_token_restarts_the_walk(
    controlplane: ControlPlane, namespace: str, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run is suspended after two pages (its next task holds a continue token), the
    tokens expire, and the resumed run is answered 410 Gone: its walk begins again."""
    plane, server = controlplane, controlplane.server
    counted = _configmaps(plane, namespace)
    run = _run(plane, server, namespace, _reader_token(plane, namespace), monkeypatch)
    with engine_worker(db_url), _admin(plane) as admin:
        run_id = start_run(db_url, run)
        wait_for(lambda: state(db_url, run_id)["rows_written"] >= 2 * PAGE, 60, "two pages")
        with connect.connect(db_url) as conn:
            assert runs.suspend(conn, run_id)
        wait_for(lambda: state(db_url, run_id)["tasks_running"] == 0, 30, "its task to stop")
        written = state(db_url, run_id)["rows_written"]
        assert PAGE * 2 <= written < counted
        probe = _first_chunk_token(admin, server, namespace)
        _compact(plane, namespace)
        expired = lambda: _expired(admin, server, namespace, probe)  # noqa: E731
        wait_for(expired, 90, "the API server to expire the continue tokens", interval=0.5)
        with connect.connect(db_url) as conn:
            runs.resume(conn, run_id)
        final = wait_finished(db_url, run_id)
    assert final["state"] == "succeeded", final["error"]
    assert _counted(plane, namespace) == counted
    landed_once(db_url, WORKSPACE, {KIND: counted})
    assert final["rows_skipped"] == written  # the walk began again: what it wrote, listed twice
    assert final["rows_written"] == counted


# -- 429 with Retry-After ---------------------------------------------------------------------


@pytest.fixture
def limited_server(controlplane: ControlPlane) -> Iterator[str]:
    """Another API server on the control plane's etcd that serves one read at a time and
    answers the others 429 with Retry-After (hack/controlplane add-apiserver): the control
    plane's own keeps its limits, for every other test."""
    state_dir = str(controlplane.state_dir)
    added = controlplane_command("add-apiserver", "--state-dir", state_dir, "limited", "--",
                                 *LIMITED)  # fmt: skip
    if added.returncode != 0:
        pytest.fail(f"hack/controlplane add-apiserver failed:\n{added.stderr}", pytrace=False)
    try:
        yield str(json.loads(added.stdout)["server"])
    finally:
        removed = controlplane_command("remove-apiserver", "--state-dir", state_dir, "limited")
        assert removed.returncode == 0, removed.stderr


@contextlib.contextmanager
def _crowd(admin: httpx.Client, server: str, namespace: str) -> Iterator[None]:
    """Someone else's reads, one after another, each holding the server's one read seat for
    3 s: a read at a resourceVersion the server has not reached waits that long for its watch
    cache, then gives up (504). As the admin: system:masters takes a seat but is never refused,
    so every 429 the server counts is the run's."""
    stop, answers = threading.Event(), list[httpx.Response]()
    url = f"{server}/api/v1/namespaces/{namespace}/configmaps/kube-root-ca.crt"

    def read() -> None:
        while not stop.is_set():
            answers.append(admin.get(url, params={"resourceVersion": UNREACHED}))

    thread = threading.Thread(target=read, name="crowd", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert answers and {a.status_code for a in answers} == {504}, answers[-1].text


def _refused(admin: httpx.Client, server: str) -> float:
    """How many of the run's lists (ConfigMaps) the server answered 429."""
    name = "apiserver_request_terminations_total"
    text = admin.get(f"{server}/metrics").raise_for_status().text
    ours = "".join(f"{line}\n" for line in text.splitlines() if line.startswith(f"{name}{{"))
    return total(parse(ours), name, code="429", resource="configmaps", verb="LIST")


def test_an_api_server_at_its_in_flight_limit_answers_429_and_the_run_loses_nothing(
    controlplane: ControlPlane,
    limited_server: str,
    namespace: str,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a crowd holds the limited server's one read seat, the run's lists are answered
    429 with Retry-After: 1; the run waits, and ends with every ConfigMap once."""
    plane = controlplane
    counted = _configmaps(plane, namespace)
    run = _run(plane, limited_server, namespace, _reader_token(plane, namespace), monkeypatch)
    with engine_worker(db_url), _admin(plane) as admin:
        assert _refused(admin, limited_server) == 0
        with _crowd(admin, limited_server, namespace):
            run_id = start_run(db_url, run)
            refused = lambda: _refused(admin, limited_server) > 0  # noqa: E731
            wait_for(refused, 60, "the server to answer the run 429", interval=0.5)
        final = wait_finished(db_url, run_id)
        refusals = _refused(admin, limited_server)
    assert final["state"] == "succeeded", final["error"]
    landed_once(db_url, WORKSPACE, {KIND: counted})
    assert final["rows_skipped"] == 0
    assert refusals > 0
    with connect.connect(db_url) as conn:  # the server's Retry-After paused the credential
        paused = conn.execute(
            "SELECT count(*) AS n FROM ferryman_rate_budgets WHERE paused_until > 'epoch'"
        ).fetchone()
    assert paused is not None and paused["n"] == 1
