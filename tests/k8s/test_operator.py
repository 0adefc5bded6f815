"""The operator on the real control plane: ``kubectl apply`` a MigrationRun, the operator (under
the chart's RBAC) admits it into a real PostgreSQL, two ``ferryman worker`` processes import the
demo CRM, and ``kubectl get migrationruns`` shows it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import psycopg
import pytest
from migration import check_against_truth
from net import free_port
from scrape import scrape, total
from tests.democrm.server_fixture import DemoCRM
from tests.k8s import blackhole, operator_bench
from tests.k8s.operator_bench import Bench, eventually, pool_objects, run_manifest, table

from ferryman_worker import contract

pytestmark = pytest.mark.k8s

DATA = {"seed": 7, "organizations": 240, "people": 160, "deals": 24, "messages_per_deal": 2}
KINDS = ("organizations", "people", "deals", "messages")


@contextlib.contextmanager
def states_of(bench: Bench, name: str) -> Iterator[list[str]]:
    """Every state the run's watch shows, in order (kubectl get --watch -o json)."""
    seen: list[str] = []
    argv = [str(bench.cp.kubectl_path), "get", "mrun", "-n", bench.namespace, "--watch"]
    argv += ["--field-selector", f"metadata.name={name}"]  # it may not exist yet
    with subprocess.Popen(
        [*argv, "-o", "json"],
        env=bench.cp.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as proc:

        def read() -> None:  # an object a line, or over several lines
            pending = ""
            for line in proc.stdout or ():
                pending += line
                try:
                    document = json.loads(pending)
                except json.JSONDecodeError:
                    continue
                pending = ""
                state = (document.get("status") or {}).get("state")
                if state and (not seen or seen[-1] != state):
                    seen.append(state)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            yield seen
        finally:
            proc.terminate()
            proc.wait(10)
            reader.join(10)


def condition(bench: Bench, name: str, kind: str) -> dict[str, Any]:
    """The run's condition of type ``kind`` ({} while it has none)."""
    found = bench.status(name).get("conditions", [])
    return {c["type"]: c for c in found}.get(kind, {})


def set_suspend(bench: Bench, name: str, suspend: bool) -> None:
    patch = json.dumps({"spec": {"suspend": suspend}})
    bench.cp.kubectl("patch", "mrun", name, "-n", bench.namespace, "--type=merge", "-p", patch)


def start(
    world: Bench,
    crm: DemoCRM,
    name: str,
    workers: int = 2,
    operator_env: dict[str, str] | None = None,
    **spec: Any,
) -> Any:
    """The Secret, an operator (with ``operator_env``), ``workers`` workers, and the run
    ``name`` applied; returns the operator's process."""
    world.secret(crm.api_key)
    operator = world.operator(**(operator_env or {}))
    world.workers(workers)
    world.apply(run_manifest(name, crm.url, **spec))
    return operator


def dict_of(found: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: found.get(key) for key in keys}


def some_rows(world: Bench, name: str) -> None:
    eventually(lambda: world.status(name).get("rowsWritten", 0) > 0, 60, f"some rows of {name}")


def refreshes(port: int) -> float:
    """The refreshes of every live run the operator serving /metrics on ``port`` has begun."""
    return total(scrape(port)[1], "ferryman_operator_refreshes_total")


def refreshed(port: int, count: int) -> None:
    """Wait until ``count`` whole refreshes of the live runs ran after this call. The counter
    counts a refresh as it begins, and the next begins only once it has ended: the one under
    way now may have begun before, the ``count + 1``-th to begin after it proves ``count``
    ended."""
    began = refreshes(port)
    eventually(lambda: refreshes(port) > began + count, 30, f"{count} whole status refreshes")


def admissions(db_url: str, key: str) -> list[int]:
    """The ids of the database's runs for the MigrationRun ``key`` (namespace/name): the one
    under that name and any cancelled one (renamed ``key@id``)."""
    with contract.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT id FROM ferryman_runs WHERE split_part(name, '@', 1) = %s ORDER BY id", (key,)
        ).fetchall()
    return [int(row["id"]) for row in rows]


def admitted_once(world: Bench, db_url: str, name: str) -> None:
    """One run in the database for ``name``, and the one its Admitted condition names."""
    ids = admissions(db_url, f"{world.namespace}/{name}")
    assert len(ids) == 1, f"{name} admitted as runs {ids}"
    admitted = condition(world, name, "Admitted")
    assert admitted["message"].startswith(f"admitted as run {ids[0]} "), admitted


def test_the_example_run_goes_pending_running_succeeded_and_kubectl_shows_its_counts(
    world: Bench, db_url: str
) -> None:
    with DemoCRM.start(**DATA) as crm:
        world.secret(crm.api_key)
        world.operator()
        # a lane without a width: 7 - 4 own - 1 = 2 threads for migrations, as `ferryman worker`
        world.workers(2, lanes="migrations,default:1", pool_size=7)
        manifest = run_manifest("acme-crm", crm.url, example=True)
        with states_of(world, "acme-crm") as seen:
            world.apply(manifest)
            final = world.wait_state("acme-crm", "Succeeded", timeout=120)
            eventually(lambda: seen[-1:] == ["Succeeded"], 10, "the watch to see Succeeded")
        truth = crm.truth()
    assert seen == ["Pending", "Running", "Succeeded"]
    check_against_truth(db_url, truth)
    expected = sum(
        len(set(truth[k]["ids"]) - {int(i) for i in truth[k]["malformed"]}) for k in KINDS
    )
    malformed = sum(len(truth[k]["malformed"]) for k in KINDS)
    assert final["rowsWritten"] == expected and final["rowsFailed"] == malformed

    [row] = table(world)
    assert list(row) == [
        "NAME",
        "WORKSPACE",
        "STATE",
        "PHASE",
        "TASKS",
        "ROWS",
        "COMPLETE",
        "REASON",
        "AGE",
    ]
    done, total = row["TASKS"].split("/")
    assert row["NAME"] == "acme-crm" and row["WORKSPACE"] == "acme" and row["STATE"] == "Succeeded"
    assert row["PHASE"] == "" and done == total and int(total) > 4
    assert row["ROWS"] == str(expected)
    [wide] = table(world, "-o", "wide")
    assert list(wide)[-6:] == ["SKIPPED", "FAILED", "ETA", "VERDICTS", "VERIFIED", "MESSAGE"]
    assert wide["SKIPPED"] == "0" and wide["FAILED"] == str(malformed)
    assert wide["MESSAGE"].startswith(f"succeeded: {expected} rows written, {malformed} malformed")

    conditions = {c["type"]: c for c in final["conditions"]}
    assert {k: c["status"] for k, c in conditions.items()} == {
        "Admitted": "True",
        "Progressing": "False",
        "Complete": "Unknown",
        "Failed": "False",
        "WorkersReady": "Unknown",
    }
    # the demo CRM's offset listings state no total: nothing contradicts the run, nothing proves it
    assert conditions["Complete"]["reason"] == "Unverified"
    assert row["COMPLETE"] == "Unknown" and row["REASON"] == "Succeeded"
    verdicts = {v["kind"]: v["verdict"] for v in final["verdicts"]}
    assert verdicts == dict.fromkeys(KINDS, "unverified")
    assert final["observedGeneration"] == 1 and final["startedAt"] and final["finishedAt"]
    reasons = world.reasons("acme-crm")
    assert reasons[0] == "Admitted" and reasons[-2:] == ["Succeeded", "Unverified"]
    with contract.connect(db_url) as conn:
        [run] = contract.progress(conn)
    phases = [e["message"] for e in world.events("acme-crm") if e["reason"] == "PhaseStarted"]
    # every phase, in order, however short (the example's are shorter than a status refresh)
    assert len(run.phase_names) > 1
    assert phases == [f"phase {name} started" for name in run.phase_names]


# -- admission: queue, reject ---------------------------------------------------------------

SLOW = {"seed": 3, "organizations": 1200, "people": 0, "deals": 0, "latency_ms": 250}
ORGS = {"kinds": ["organizations"], "options": {"pageSize": 50, "stripes": 2}}


@pytest.mark.slow
def test_a_second_run_waits_queued_then_runs_by_itself_and_a_reject_one_fails(world: Bench) -> None:
    with DemoCRM.start(**SLOW) as crm:
        start(world, crm, "first", **ORGS)
        world.wait_state("first", "Running")
        world.apply(run_manifest("second", crm.url, **ORGS))
        world.apply(run_manifest("third", crm.url, conflictPolicy="Reject", **ORGS))
        queued = world.wait_state("second", "Queued", timeout=20)
        refused = world.wait_state("third", "Failed", timeout=20)
        assert world.status("first")["state"] == "Running"
        admitted = {c["type"]: c for c in queued["conditions"]}["Admitted"]
        assert (admitted["status"], admitted["reason"]) == ("False", "WorkspaceBusy")
        assert f"{world.namespace}/first" in admitted["message"]
        assert f"{world.namespace}/first" in queued["message"]
        failed = {c["type"]: c for c in refused["conditions"]}["Failed"]
        assert failed["status"] == "True" and "conflictPolicy is Reject" in failed["message"]
        assert "Refused" in world.reasons("third") and "Queued" in world.reasons("second")

        world.wait_state("first", "Succeeded", timeout=120)
        world.wait_state("second", "Succeeded", timeout=120)
        assert world.status("third")["state"] == "Failed"  # refused stays refused
    assert world.reasons("second")[:2] == ["Queued", "Admitted"]


def database(db_url: str, key: str) -> contract.RunProgress:
    """The run's aggregate in the database, as the operator reads it."""
    with contract.connect(db_url) as conn:
        (found,) = contract.progress(conn, key)
    return found


# -- suspend, resume, cancel, retry, TTL ------------------------------------------------------


def test_suspend_stops_progress_and_resume_continues_it(world: Bench, db_url: str) -> None:
    port = free_port()
    with DemoCRM.start(**SLOW) as crm:
        start(
            world, crm, "paused", operator_env={"FERRYMAN_OPERATOR_METRICS_PORT": str(port)}, **ORGS
        )
        some_rows(world, "paused")
        set_suspend(world, "paused", True)
        suspended = lambda: condition(world, "paused", "Progressing").get("reason") == "Suspended"  # noqa: E731
        eventually(suspended, 20, "Progressing=False/Suspended")
        key = f"{world.namespace}/paused"
        eventually(lambda: database(db_url, key).tasks_running == 0, 30, "tasks stopped")
        held = database(db_url, key).rows_written  # no task runs: nothing can be written now
        eventually(lambda: world.status("paused")["rowsWritten"] == held, 20, "the status")
        refreshed(port, 3)  # an observation window: the status refreshes, no row is written
        assert database(db_url, key).rows_written == world.status("paused")["rowsWritten"] == held
        assert world.status("paused")["state"] == "Running"
        set_suspend(world, "paused", False)
        final = world.wait_state("paused", "Succeeded", timeout=120)
        assert final["rowsWritten"] > held
    reasons = world.reasons("paused")
    assert reasons.index("Suspended") < reasons.index("Resumed") < reasons.index("Succeeded")


def test_deleting_a_live_run_cancels_it_and_the_object_goes_away(world: Bench, db_url: str) -> None:
    with DemoCRM.start(**SLOW) as crm:
        start(world, crm, "doomed", **ORGS)
        some_rows(world, "doomed")
        world.cp.kubectl("delete", "mrun", "doomed", "-n", world.namespace, "--timeout=30s")
        gone = world.cp.kubectl("get", "mrun", "doomed", "-n", world.namespace, check=False)
        assert gone.returncode != 0 and "NotFound" in gone.stderr
        with contract.connect(db_url) as conn:
            [run] = contract.progress(conn)
        assert run.state is contract.RunState.CANCELLED and run.rows_written > 0
        assert run.name == f"{world.namespace}/doomed@{run.id}"  # the name is free again

        world.apply(run_manifest("doomed", crm.url, **ORGS))  # the same name: a new run
        again = world.wait_state("doomed", "Running", timeout=20)
        admitted = {c["type"]: c for c in again["conditions"]}["Admitted"]
        assert (
            admitted["message"].startswith("admitted as run ")
            and str(run.id) not in admitted["message"]
        )


def test_a_run_deleted_while_the_operator_is_down_goes_when_it_returns(world: Bench) -> None:
    with DemoCRM.start(seed=13, organizations=100, people=0, deals=0) as crm:
        operator = start(world, crm, "orphan", workers=1, kinds=["organizations"])
        world.wait_state("orphan", "Succeeded", timeout=60)
        assert operator.terminate() == 0
        world.cp.kubectl("delete", "mrun", "orphan", "-n", world.namespace, "--wait=false")
        stuck = world.get("orphan")
        assert stuck["metadata"]["deletionTimestamp"]
        assert stuck["metadata"]["finalizers"] == ["ferryman.dev/cancel-run"]
        world.operator()

        def gone() -> bool:
            result = world.cp.kubectl("get", "mrun", "orphan", "-n", world.namespace, check=False)
            return result.returncode != 0

        eventually(gone, 30, "the run to go once the operator is back")


def test_retry_by_annotation_reopens_a_failed_run_once_the_secret_is_right(world: Bench) -> None:
    with DemoCRM.start(seed=5, organizations=300, people=100, deals=0) as crm:
        world.secret("wrong-token")
        world.operator()
        world.workers(2)
        world.apply(run_manifest("unlucky", crm.url, kinds=["organizations", "people"]))
        failed = world.wait_state("unlucky", "Failed", timeout=90)
        assert "401" in failed["message"] or "refused" in failed["message"], failed["message"]
        assert "Failed" in world.reasons("unlucky")

        world.secret(crm.api_key)
        world.cp.kubectl(
            "annotate", "mrun", "unlucky", "-n", world.namespace, "ferryman.dev/retry=1"
        )
        taken = lambda: world.status("unlucky").get("lastRetry") == "1"  # noqa: E731
        eventually(taken, 30, "the retry to be taken")
        final = world.wait_state("unlucky", "Succeeded", timeout=90)
    assert final["lastRetry"] == "1"
    assert {c["type"]: c["status"] for c in final["conditions"]}["Failed"] == "False"
    assert "Retried" in world.reasons("unlucky")


def test_a_finished_run_is_deleted_after_ttl_seconds(world: Bench) -> None:
    with DemoCRM.start(seed=9, organizations=100, people=0, deals=0) as crm:
        start(world, crm, "brief", workers=1, kinds=["organizations"], ttlSecondsAfterFinished=2)
        # The run may go within its 2 s TTL of succeeding, before a poll of ours sees it
        # Succeeded (a kubectl call took longer than that at a load average of 20): its
        # Succeeded Event, which outlives it, is the proof that it finished first.
        eventually(lambda: "Succeeded" in world.reasons("brief"), 120, "brief to succeed")
        wait_gone(world, "brief", "the run to be deleted after its TTL")
    assert world.reasons("brief").count("Succeeded") == 1


def test_a_run_deleted_while_its_refresh_waits_on_the_database_goes_once_it_answers(
    world: Bench, db_url: str
) -> None:
    """The refresh in flight when the deletion is processed (it waits on the database) must not
    keep the object: it goes once the database answers, and the refresh's late status patch of
    a run gone is no error."""
    with DemoCRM.start(**SLOW) as crm:
        start(world, crm, "held", **ORGS)
        some_rows(world, "held")
        set_suspend(world, "held", True)  # live (refreshed every interval), and it stays so
        suspended = lambda: condition(world, "held", "Progressing").get("reason") == "Suspended"  # noqa: E731
        eventually(suspended, 20, "Progressing=False/Suspended")
        with psycopg.connect(db_url) as conn:  # a transaction: the lock holds until rollback
            conn.execute("LOCK TABLE ferryman_runs IN ACCESS EXCLUSIVE MODE")
            eventually(lambda: blocked_lookups(db_url) == 1, 20, "the refresh to wait on the lock")
            world.cp.kubectl("delete", "mrun", "held", "-n", world.namespace, "--wait=false")
            eventually(lambda: blocked_lookups(db_url) == 2, 20, "the delete handler to wait too")
            conn.rollback()  # the database answers both
        wait_gone(world, "held", "the deleted run to go")


def blocked_lookups(db_url: str) -> int:
    """The operator's lookups of runs by name that wait on a lock (the refresh's of every live
    run, its handlers' of one)."""
    with contract.connect(db_url) as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND (query LIKE 'SELECT * FROM ferryman_runs WHERE name = %'"
            " OR query LIKE '%The operator reads every live run%')"  # its text is cut at 1 kB
        ).fetchone()
    return int(row["n"]) if row else 0


def wait_gone(world: Bench, name: str, what: str) -> None:
    """Wait up to 20 s until ``kubectl get`` no longer finds the run; if it still does, say
    what keeps it (finalizers, deletionTimestamp) and whether it is the same object."""
    found = world.cp.kubectl("get", "mrun", name, "-n", world.namespace, "-o", "json", check=False)
    if found.returncode != 0:
        return  # gone already
    uid = json.loads(found.stdout)["metadata"]["uid"]

    def gone() -> bool:
        found = world.cp.kubectl(
            "get", "mrun", name, "-n", world.namespace, "-o", "json", check=False
        )
        if found.returncode != 0:
            return True
        meta = json.loads(found.stdout)["metadata"]
        keys = ("uid", "creationTimestamp", "deletionTimestamp", "finalizers")
        raise AssertionError(f"still there (the run's uid was {uid}): {dict_of(meta, keys)}")

    eventually(gone, 20, what)


# -- only one operator acts; SIGKILL ------------------------------------------------------------


def healthz(process: Any) -> int:
    try:
        return httpx.get(f"http://127.0.0.1:{process.port}/healthz", timeout=5).status_code
    except httpx.HTTPError:
        return 0


@pytest.mark.slow
def test_two_operators_one_acts_and_the_other_takes_over_after_a_sigkill(
    world: Bench, db_url: str
) -> None:
    with DemoCRM.start(**SLOW) as crm:
        world.secret(crm.api_key)
        first = world.operator()
        second = world.operator(wait=False)
        world.workers(2)
        for name in ("left", "right"):
            world.apply(run_manifest(name, crm.url, **ORGS))

        def one_running() -> dict[str, Any] | None:
            states = {n: world.status(n).get("state") for n in ("left", "right")}
            return states if set(states.values()) == {"Running", "Queued"} else None

        states = eventually(one_running, 20, "one Running, one Queued")
        [running] = [name for name, state in states.items() if state == "Running"]
        eventually(lambda: "Admitted" in world.reasons(running), 30, f"{running}'s Admitted Event")
        world.wait_standby(second)  # started (slowly, on a loaded machine), the Lease seen held
        assert world.leader() == first.identity  # type: ignore[attr-defined]
        assert "Handler" not in second.output() and "Timer" not in second.output()
        assert healthz(first) == 200
        assert healthz(second) == 200  # a standby is alive to its probes too

        first.kill()  # SIGKILL: no release of the Lease, no goodbye
        world.wait_leader(second, timeout=30)
        eventually(lambda: healthz(second) == 200, 10, "kopf's liveness endpoint")
        for name in ("left", "right"):
            world.wait_state(name, "Succeeded", timeout=180)
        truth = crm.truth()
    check_against_truth(db_url, truth, kinds=("organizations",))
    with contract.connect(db_url) as conn:
        names = sorted(p.name for p in contract.progress(conn))
    assert names == [f"{world.namespace}/left", f"{world.namespace}/right"]
    for name in ("left", "right"):  # the new leader admitted neither again
        admitted_once(world, db_url, name)
        assert world.reasons(name).count("Admitted") == 1, world.reasons(name)


def test_an_operator_killed_right_after_an_apply_admits_the_run_once_when_restarted(
    world: Bench, db_url: str
) -> None:
    with DemoCRM.start(seed=11, organizations=400, people=0, deals=0) as crm:
        first = start(world, crm, "abrupt", kinds=["organizations"])
        key = f"{world.namespace}/abrupt"
        eventually(lambda: admissions(db_url, key), 60, "the admission", interval=0.02)
        first.kill()  # right after its admission committed: its status and Events may not be out
        world.operator(wait=True)
        world.wait_state("abrupt", "Succeeded", timeout=90)
        truth = crm.truth()
    check_against_truth(db_url, truth, kinds=("organizations",))
    admitted_once(world, db_url, "abrupt")


# -- robustness: the database goes away ---------------------------------------------------------


OUTAGE = 60.0
"""Seconds the operator's database stays away (the issue: "for a minute")."""


@pytest.mark.slow
def test_the_operator_survives_a_minute_without_its_database_and_recovers_by_itself(
    world: Bench, db_url: str, tmp_path: Path
) -> None:
    proxy = operator_bench.SocketProxy(db_url, tmp_path / "proxy")
    with DemoCRM.start(**SLOW) as crm:
        world.secret(crm.api_key)
        operator = world.operator(FERRYMAN_DATABASE_URL=proxy.url)
        world.workers(2)  # straight to the database: only the operator loses it
        world.apply(run_manifest("steady", crm.url, **ORGS))
        some_rows(world, "steady")
        proxy.cut()
        cut_at = time.monotonic()

        def unavailable() -> bool:
            found = condition(world, "steady", "Progressing")
            return (found.get("status"), found.get("reason")) == ("Unknown", "DatabaseUnavailable")

        eventually(unavailable, 20, "Progressing=Unknown/DatabaseUnavailable")
        down = world.status("steady")
        assert down["state"] == "Running" and "PostgreSQL" in down["message"]
        while time.monotonic() - cut_at < OUTAGE:  # all along, the status says so
            assert operator.alive(), operator.output()[-3000:]
            assert unavailable(), world.status("steady")
            time.sleep(2)
        assert world.reasons("steady").count("DatabaseUnavailable") == 1  # said once, no flapping
        logged = operator.output().count(f"run {world.namespace}/steady: database unavailable")
        assert logged == 1, operator.output()[-3000:]  # a warning once, not every refresh
        proxy.restore()
        final = world.wait_state("steady", "Succeeded", timeout=120)
    assert condition(world, "steady", "Progressing")["reason"] == "Succeeded"
    assert final["tasksDone"] == final["tasksTotal"] > 0 and operator.alive()
    proxy.cut()


# -- sizing the workers from the pool spec ------------------------------------------------------


@contextlib.contextmanager
def pool_spec(
    world: Bench, lanes: str, replicas: int, pool_size: int | None = None
) -> Iterator[None]:
    """A pool-spec ConfigMap and its worker Deployment (replicas 0) in the release namespace,
    as the chart renders them; deleted at the end."""
    items = pool_objects(world.release_ns, lanes, replicas, pool_size)
    listed = {"apiVersion": "v1", "kind": "List", "items": items}
    world.cp.kubectl("apply", "-f", "-", input=json.dumps(listed))
    try:
        yield
    finally:
        world.cp.kubectl(
            "delete",
            "configmap,deployment",
            "-l",
            "ferryman.dev/workers=ferryman",
            "-n",
            world.release_ns,
            check=False,
        )
        world.cp.kubectl(
            "delete", "configmap", "ferryman-pool", "-n", world.release_ns, check=False
        )


def worker_deployment(world: Bench) -> dict[str, Any]:
    found: dict[str, Any] = world.cp.kubectl_json(
        "get", "deployment", "ferryman-worker", "-n", world.release_ns
    )
    return found


def worker_env(deployment: dict[str, Any]) -> dict[str, str]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"]}


def resized(world: Bench, replicas: int) -> dict[str, Any]:
    """The worker Deployment once the operator gave it ``replicas``."""
    found: dict[str, Any] = eventually(
        lambda: (d := worker_deployment(world))["spec"]["replicas"] == replicas and d,
        30,
        f"the Deployment to be resized to {replicas}",
    )
    return found


def spec_hash(deployment: dict[str, Any]) -> str:
    return str(
        deployment["spec"]["template"]["metadata"]["annotations"]["ferryman.dev/pool-spec-hash"]
    )


def digest(lanes: str, pool_size: int) -> str:
    return hashlib.sha256(f"lanes={lanes};poolSize={pool_size}".encode()).hexdigest()[:16]


POOL_SPEC = "ferryman.dev/pool-spec"
"""The label of a pool-spec ConfigMap (its value names the pool)."""


@contextlib.contextmanager
def proxied_operator(world: Bench, tmp_path: Path) -> Iterator[blackhole.Blackhole]:
    """An operator whose requests to the API server go through a proxy that notes them (the
    proxy is yielded); stopped while it can still reach the API server, before the proxy."""
    with blackhole.running(world.kubeconfig) as proxy:
        operator = world.operator(KUBECONFIG=str(proxy.kubeconfig(tmp_path / "proxied.kubeconfig")))
        try:
            yield proxy
        finally:
            operator.terminate()


def pool_checks(proxy: blackhole.Blackhole, namespace: str) -> int:
    """The operator's checks of the pool specs of ``namespace`` begun so far (seen through
    ``proxy``): each check begins by listing every ConfigMap labelled as a pool spec there."""
    listing = f"/api/v1/namespaces/{namespace}/configmaps"

    def lists_pool_specs(request: blackhole.Request) -> bool:
        url = urlsplit(request.path)
        selector = parse_qs(url.query).get("labelSelector")
        return request.method == "GET" and url.path == listing and selector == [POOL_SPEC]

    return sum(1 for request in list(proxy.requests) if lists_pool_specs(request))


def pool_checked(proxy: blackhole.Blackhole, namespace: str, count: int) -> None:
    """Wait until the operator has checked the pool specs ``count`` whole times after this
    call: the check under way now may have begun before, and a check begins only once the one
    before it has ended, so the ``count + 1``-th to begin after it proves ``count`` ended."""
    began = pool_checks(proxy, namespace)
    eventually(
        lambda: pool_checks(proxy, namespace) > began + count,
        30,
        f"{count} whole checks of the pool spec",
    )


def test_an_over_budget_pool_spec_changes_nothing_then_a_fitting_one_is_written_once(
    world: Bench, db_url: str, tmp_path: Path
) -> None:
    """The operator talks to the API server through a proxy that notes its requests, so the
    test sees each check of the pool spec begin."""
    with contract.connect(db_url) as conn:
        budget = contract.connection_budget(conn)
    ns = world.release_ns
    world.secret("any-token")
    with (
        pool_spec(world, "migrations:4,default:2", budget.available),
        proxied_operator(world, tmp_path) as proxy,
    ):
        world.apply(
            run_manifest("waiting", "http://127.0.0.1:9", kinds=["organizations"], suspend=True)
        )

        def workers_ready(status: str) -> dict[str, Any] | None:
            ready = condition(world, "waiting", "WorkersReady")
            return ready if ready.get("status") == status else None

        refused = eventually(lambda: workers_ready("False"), 30, "WorkersReady=False")
        assert refused["reason"] == "OverConnectionBudget"
        assert f"{budget.available} replicas x 10 connections + 6" in refused["message"]
        assert f"max_connections {budget.max_connections}" in refused["message"]
        stored = worker_deployment(world)
        assert stored["metadata"]["generation"] == 1 and stored["spec"]["replicas"] == 0
        warnings = world.cp.kubectl_json(
            "get", "events", "-n", ns, "--field-selector", "involvedObject.name=ferryman-worker"
        )
        assert [e["reason"] for e in warnings["items"] if e["type"] == "Warning"] == [
            "OverConnectionBudget"
        ]

        fitting, _ = pool_objects(ns, "migrations:3,default:1", 1)
        world.cp.kubectl("apply", "-f", "-", input=json.dumps(fitting))
        eventually(lambda: workers_ready("True"), 30, "WorkersReady=True")
        written = resized(world, 1)
        assert worker_env(written) == {
            "FERRYMAN_LANES": "migrations:3,default:1",
            "FERRYMAN_POOL_SIZE": "8",
        }
        assert spec_hash(written) == digest("migrations:3,default:1", 8)
        pool_checked(proxy, ns, 4)  # four more checks: nothing more is written
        again = worker_deployment(world)
        assert again["metadata"]["generation"] == written["metadata"]["generation"]

        narrower, _ = pool_objects(ns, "migrations:2", 1)  # a changed lanes string
        world.cp.kubectl("apply", "-f", "-", input=json.dumps(narrower))

        def relaned() -> dict[str, Any] | None:
            found = worker_deployment(world)
            return found if worker_env(found)["FERRYMAN_LANES"] == "migrations:2" else None

        changed = eventually(relaned, 30, "the new lanes in the Deployment")
        pool_checked(proxy, ns, 4)
        settled = worker_deployment(world)
        assert (
            settled["metadata"]["generation"]
            == changed["metadata"]["generation"]
            == again["metadata"]["generation"] + 1
        )
        assert worker_env(settled)["FERRYMAN_POOL_SIZE"] == "6"


def test_a_lane_without_a_width_takes_its_threads_from_the_pool_size(
    world: Bench, db_url: str
) -> None:
    """The worker's rule, applied by the operator: 15 - 4 own - 2 for critical = 9 threads for
    the two lanes without a width, 5 for migrations (the first gets the remainder), 4 for
    default; the migrations lane's 5 make a run's default maxInFlight 10."""
    lanes = "migrations,critical:2,default"
    with pool_spec(world, lanes, 2, pool_size=15):
        world.secret("any-token")
        world.operator()
        sized = resized(world, 2)
        assert worker_env(sized) == {"FERRYMAN_LANES": lanes, "FERRYMAN_POOL_SIZE": "15"}
        assert spec_hash(sized) == digest(lanes, 15)  # what the chart computes from its values
        world.apply(
            run_manifest("shared", "http://127.0.0.1:9", kinds=["organizations"], suspend=True)
        )
        world.wait_state("shared", "Running", timeout=30)
        assert condition(world, "shared", "WorkersReady")["reason"] == "PoolSpecApplied"
        with contract.connect(db_url) as conn:
            row = conn.execute(
                "SELECT options FROM ferryman_runs WHERE name = %s",
                (f"{world.namespace}/shared",),
            ).fetchone()
        assert row is not None and row["options"]["max_in_flight"] == 2 * 5


# -- the API server restarts ----------------------------------------------------------------------


@pytest.mark.slow
def test_the_operator_carries_on_across_an_api_server_restart(
    start_controlplane: Any, db_url: str, tmp_path: Path
) -> None:
    """On a control plane of its own (its API server is stopped and started again)."""
    with start_controlplane(
        tmp_path / "plane", "--no-controller-manager", "--watch-pid", str(os.getpid())
    ) as cp:
        operator_bench.install_crd(cp)
        cp.kubectl("create", "namespace", "ferryman-system")
        cp.kubectl("create", "namespace", "runs")
        kubeconfig = operator_bench.install_operator_rbac(cp, "ferryman-system", tmp_path)
        with (
            operator_bench.bench(
                cp, "ferryman-system", kubeconfig, "runs", db_url, tmp_path
            ) as world,
            DemoCRM.start(**SLOW) as crm,
        ):
            operator = start(world, crm, "before", **ORGS)
            world.wait_state("before", "Running", timeout=30)
            operator_bench.restart_apiserver(cp, down_for=3)
            world.apply(run_manifest("after", crm.url, workspace="globex", **ORGS))
            world.wait_state("after", "Running", timeout=60)  # watches resumed
            world.wait_state("before", "Succeeded", timeout=120)  # status patches resumed
            world.wait_state("after", "Succeeded", timeout=120)
            assert operator.alive()


def test_a_run_whose_source_fails_shows_the_retrying_line_then_recovers(world: Bench) -> None:
    with DemoCRM.start(seed=17, organizations=200, people=0, deals=0, error_rate=1.0) as crm:
        start(world, crm, "flaky", workers=1, kinds=["organizations"])

        def retrying() -> dict[str, Any] | None:
            found = world.status("flaky")
            kinds = {c["type"]: c for c in found.get("conditions", [])}
            return found if kinds.get("Progressing", {}).get("reason") == "Retrying" else None

        shown = eventually(retrying, 60, "Progressing=True/Retrying")
        assert shown["message"].startswith("retrying ") and "task(s)" in shown["message"]
        [row] = table(world, "-o", "wide")
        assert row["MESSAGE"].startswith("retrying ")
        crm.configure(error_rate=0.0)
        world.wait_state("flaky", "Succeeded", timeout=120)
