"""The chart for real: `helm install --wait` of charts/ferryman with the project's image on the
local node (kubelet + containerd), and migration runs applied with kubectl that real pods carry
out against the demo CRM and a PostgreSQL on the host's loopback.

Installed with the chart's values for a local cluster (charts/ferryman/values-local.yaml):
everything runs on the host's network (`hostNetwork: true`), since the node has no kube-proxy and
no cluster DNS; the operator reaches the API server through KUBERNETES_SERVICE_HOST/PORT = its
loopback address (`apiServer`), and every pod reaches PostgreSQL and the CRM on 127.0.0.1. One
worker replica (two could not bind one host port); the worker and operator ports are picked free.
The tests share one release and run in file order: install, a run, the reaper, a worker deleted
mid-run, an upgrade mid-run, uninstall; the last one installs a second release whose migration
must fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import runfiles
from listener import listening
from migration import check_against_truth
from net import free_port
from tcp_postgres import create_database, tcp_postgres
from tests.democrm.server_fixture import DemoCRM

pytestmark = [pytest.mark.k8s, pytest.mark.node, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ferryman"
LOCAL_VALUES = CHART / "values-local.yaml"
CACHE = Path(
    os.environ.get("FERRYMAN_CACHE_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ferryman"
)
RELEASE = "fm"
DATASET = {"seed": 7, "organizations": 4000, "people": 3000, "deals": 200, "malformed_rate": 0.01}
# Listings of 50 rows answered after 150 ms: a run takes long enough to be cut in the middle.
LATENCY_MS = 150
PAGE_SIZE = 50


@dataclass
class Release:
    plane: Any
    namespace: str
    db_url: str
    crm: DemoCRM
    values: list[str]

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.plane.kubectl(*args, "-n", self.namespace, **kwargs)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def helm(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.plane.helm(*args, "-n", self.namespace, **kwargs)

    def apply_run(self, name: str, workspace: str) -> None:
        self.kubectl(
            "apply", "-f", "-", input=run_yaml(name, self.namespace, workspace, self.crm.url)
        )

    def run_status(self, name: str) -> dict[str, Any]:
        return dict(self.get("migrationrun", name).get("status") or {})

    def worker_pods(self) -> list[dict[str, Any]]:
        selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=worker"
        return list(self.get("pods", "-l", selector)["items"])


def run_yaml(name: str, namespace: str, workspace: str, url: str) -> str:
    return runfiles.run_yaml(
        url, name=name, namespace=namespace, workspace=workspace, page_size=PAGE_SIZE
    )


def image_ref() -> str:
    """`hack/image` (cached by content: a no-op when nothing changed); its ref."""
    result = subprocess.run(
        [str(ROOT / "hack" / "image")], capture_output=True, text=True, timeout=1800
    )
    assert result.returncode == 0, f"hack/image failed:\n{result.stderr[-4000:]}"
    ref = result.stdout.strip().splitlines()[-1]
    # Fail at once, with the reason, rather than after helm's 5 minutes of a crashing operator.
    conf = str(CACHE / "image" / "containers.conf")
    probe = subprocess.run(
        ["podman", "run", "--rm", "--network=none", ref, "operator", "--help"],
        env={**os.environ, "CONTAINERS_CONF": conf},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode != 0:
        pytest.fail(f"{ref} cannot run `ferryman operator`:\n{probe.stderr[-2000:]}", False)
    return ref


def local_values(node: Any, image: str) -> list[str]:
    """The chart's values for a local node (charts/ferryman/values-local.yaml, and the API
    server's port), this image, free host ports, and small graces for quick rollouts."""
    repository, tag = image.rsplit(":", 1)
    api = node.in_cluster_env
    assert api["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"  # the values file's
    settings = {
        "image.repository": repository,
        "image.tag": tag,
        "apiServer.port": api["KUBERNETES_SERVICE_PORT"],
        "operator.livenessPort": str(free_port()),
        "operator.metricsPort": str(free_port()),
        "worker.metricsPort": str(free_port()),
        "worker.lanes": "migrations:4\\,default:1",
        "worker.shutdownGrace": "5",
        "worker.preStopSleepSeconds": "1",
        "worker.terminationGracePeriodSeconds": "20",
        "worker.heartbeatInterval": "2",
    }
    args = ["-f", str(LOCAL_VALUES)]
    for key, value in settings.items():
        args += ["--set-string" if key.endswith("tag") else "--set", f"{key}={value}"]
    return args


@pytest.fixture(scope="module")
def release(node: Any) -> Iterator[Release]:
    """The chart's values for the node, secrets in a fresh namespace, PostgreSQL and the demo CRM
    on loopback; the release is uninstalled at the end if a test did not."""
    plane = node.controlplane
    image = image_ref()
    node.load_image(image)
    namespace = f"e2e-{int(time.time())}"
    plane.kubectl("create", "namespace", namespace)
    with tcp_postgres() as admin_url, DemoCRM.start(latency_ms=LATENCY_MS, **DATASET) as crm:
        db_url = create_database(admin_url, "ferryman_e2e")
        kube_url = url_of(db_url)
        plane.kubectl(
            "create",
            "secret",
            "generic",
            "ferryman-database",
            f"--from-literal=url={kube_url}",
            "-n",
            namespace,
        )
        plane.kubectl(
            "create",
            "secret",
            "generic",
            "democrm-token",
            f"--from-literal=token={crm.api_key}",
            "-n",
            namespace,
        )
        secret_for(plane, namespace, crm.api_key, crm_host(crm), create=False)
        rel = Release(plane, namespace, kube_url, crm, local_values(node, image))
        try:
            yield rel
        finally:
            rel.helm("uninstall", RELEASE, "--wait", check=False)
            plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def crm_host(crm: DemoCRM) -> str:
    """The demo CRM's scheme, host and port: what a Secret of its token is bound to."""
    return crm.url.rstrip("/")


def secret_for(plane: Any, namespace: str, token: str, hosts: str, create: bool = True) -> None:
    """The Secret democrm-token in ``namespace`` (``create``: make it), bound to ``hosts``."""
    if create:
        plane.kubectl(
            "create",
            "secret",
            "generic",
            "democrm-token",
            f"--from-literal=token={token}",
            "-n",
            namespace,
        )
    plane.kubectl(
        "annotate", "secret", "democrm-token", f"ferryman.dev/hosts={hosts}", "-n", namespace
    )


def refused(plane: Any, namespace: str, name: str, wait_for: Any) -> dict[str, Any]:
    """The Admitted condition of the run once it is Failed (refused)."""

    def failed() -> dict[str, Any] | None:
        got = plane.kubectl_json("get", "migrationrun", name, "-n", namespace)
        status = got.get("status") or {}
        assert status.get("state") not in ("Running", "Succeeded"), status
        if status.get("state") != "Failed":
            return None
        return {c["type"]: c for c in status["conditions"]}["Admitted"]

    return dict(wait_for(failed, timeout=120, interval=1.0))


def url_of(conninfo: str) -> str:
    """A postgresql:// URL for a libpq conninfo string (what databases.create returns)."""
    p = psycopg.conninfo.conninfo_to_dict(conninfo)
    return f"postgresql://{p['user']}@{p['host']}:{p['port']}/{p['dbname']}"


def wait_state(rel: Release, name: str, want: str, timeout: float, wait_for: Any) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        status = rel.run_status(name)
        assert status.get("state") not in ({"Failed", "Cancelled"} - {want}), status
        return status if status.get("state") == want else None

    return dict(wait_for(reached, timeout=timeout, interval=1.0))


# -- the scenario, in order -----------------------------------------------------------------------


def test_helm_install_waits_for_the_migrated_database_and_ready_pods(release: Release) -> None:
    started = time.monotonic()
    out = release.helm(
        "install", RELEASE, str(CHART), *release.values, "--wait", "--timeout", "5m", timeout=400
    )
    took = time.monotonic() - started
    assert "STATUS: deployed" in out.stdout, out.stdout
    assert "kubectl get migrationruns" in out.stdout  # NOTES.txt
    # the pre-install hook migrated the database (and, having succeeded, was deleted)
    with psycopg.connect(release.db_url) as conn:
        applied = conn.execute("SELECT count(*) FROM ferryman_schema_migrations").fetchone()
    assert applied is not None and applied[0] > 0
    assert not release.get("jobs", "-l", "app.kubernetes.io/component=migrate")["items"]
    for component in ("operator", "worker"):
        [pod] = release.get("pods", "-l", f"app.kubernetes.io/component={component}")["items"]
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert ready["Ready"] == "True", (component, pod["status"])
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    print(f"helm install --wait took {took:.1f} s")


def test_a_run_applied_with_kubectl_succeeds_and_writes_the_truth(
    release: Release, wait_for: Any
) -> None:
    release.apply_run("acme-crm", "acme")
    status = wait_state(release, "acme-crm", "Succeeded", 300, wait_for)
    truth = release.crm.truth()
    check_against_truth(release.db_url, truth, workspace="acme")
    malformed = sum(len(truth[k]["malformed"]) for k in ("organizations", "people", "deals"))
    assert status["rowsFailed"] >= malformed > 0
    table = release.kubectl("get", "migrationruns").stdout
    assert "acme-crm" in table and "Succeeded" in table and str(status["rowsWritten"]) in table


def test_the_reaper_cronjob_runs_ferryman_reap(release: Release, wait_for: Any) -> None:
    release.kubectl("create", "job", "--from", f"cronjob/{RELEASE}-ferryman-reaper", "reap-now")
    wait_for(
        lambda: release.get("job", "reap-now").get("status", {}).get("succeeded") == 1,
        timeout=120,
        interval=1.0,
    )
    logs = release.kubectl("logs", "job/reap-now").stdout
    assert "dead or stale task claims:" in logs, logs


def test_a_run_in_a_team_namespace_with_its_own_secret_succeeds(
    release: Release, wait_for: Any
) -> None:
    team = f"{release.namespace}-team"
    release.plane.kubectl("create", "namespace", team)
    try:
        secret_for(release.plane, team, release.crm.api_key, crm_host(release.crm))
        manifest = runfiles.run_yaml(
            release.crm.url, name="hooli-crm", namespace=team, workspace="hooli", page_size=100
        )
        release.plane.kubectl("apply", "-f", "-", input=manifest)
        team_view = Release(release.plane, team, release.db_url, release.crm, release.values)
        wait_state(team_view, "hooli-crm", "Succeeded", 300, wait_for)
        check_against_truth(release.db_url, release.crm.truth(), workspace="hooli")
    finally:
        release.plane.kubectl("delete", "mrun", "--all", "-n", team, "--wait=true", check=False)
        release.plane.kubectl("delete", "namespace", team, "--wait=false", check=False)


def test_an_intruder_gets_neither_a_teams_token_nor_its_workspace(
    release: Release, wait_for: Any
) -> None:
    plane, crm = release.plane, release.crm
    intruder = f"{release.namespace}-intruder"
    plane.kubectl("create", "namespace", intruder)
    try:
        with listening({"*": (200, {}, b"{}")}) as trap:
            # A's Secret named from another namespace, pointed at the intruder's listener
            plane.kubectl("apply", "-f", "-", input=run_yaml("steal", intruder, "loot", trap.url))
            missing = refused(plane, intruder, "steal", wait_for)
            # in A's own namespace, a baseURL that A's Secret is not bound to
            release.kubectl(
                "apply", "-f", "-", input=run_yaml("leak", release.namespace, "leak", trap.url)
            )
            unbound = refused(plane, release.namespace, "leak", wait_for)
            # the intruder's own, valid credential, into A's workspace
            secret_for(plane, intruder, crm.api_key, crm_host(crm))
            plane.kubectl("apply", "-f", "-", input=run_yaml("squat", intruder, "acme", crm.url))
            owned = refused(plane, intruder, "squat", wait_for)
        assert trap.received == []  # nothing at all: no header, no query string
        assert missing["reason"] == "CredentialMissing"
        assert unbound["reason"] == "CredentialNotBound" and crm_host(crm) in unbound["message"]
        assert owned["reason"] == "WorkspaceOwned" and release.namespace in owned["message"]
        check_against_truth(release.db_url, crm.truth(), workspace="acme")  # A's rows only
    finally:
        plane.kubectl("delete", "mrun", "--all", "-n", intruder, "--wait=true", check=False)
        plane.kubectl("delete", "namespace", intruder, "--wait=false", check=False)
        release.kubectl("delete", "mrun", "leak", "--wait=true", check=False)


def test_a_worker_pod_deleted_mid_run_loses_nothing(release: Release, wait_for: Any) -> None:
    release.apply_run("globex-crm", "globex")
    wait_for(
        lambda: (release.run_status("globex-crm").get("rowsWritten") or 0) > 0, 120, interval=0.5
    )
    [old] = release.worker_pods()
    assert release.run_status("globex-crm")["state"] == "Running"  # cut in the middle
    release.kubectl("delete", "pod", old["metadata"]["name"], "--wait=false")

    def replaced() -> bool:
        pods = [p for p in release.worker_pods() if p["metadata"]["uid"] != old["metadata"]["uid"]]
        return any(p["status"].get("phase") == "Running" for p in pods)

    wait_for(replaced, timeout=120, interval=1.0)
    wait_state(release, "globex-crm", "Succeeded", 300, wait_for)
    check_against_truth(release.db_url, release.crm.truth(), workspace="globex")


def test_helm_upgrade_with_new_lanes_rolls_the_workers_and_the_run_goes_on(
    release: Release, wait_for: Any
) -> None:
    [before] = release.worker_pods()
    release.apply_run("initech-crm", "initech")
    wait_for(
        lambda: (release.run_status("initech-crm").get("rowsWritten") or 0) > 0, 120, interval=0.5
    )
    assert release.run_status("initech-crm")["state"] == "Running"  # the upgrade comes mid-run
    release.helm(
        "upgrade",
        RELEASE,
        str(CHART),
        *release.values,
        "--set",
        "worker.lanes=migrations:2\\,default:1",
        "--wait",
        "--timeout",
        "5m",
    )
    [after] = release.worker_pods()
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    env = {e["name"]: e.get("value") for e in after["spec"]["containers"][0]["env"]}
    assert env["FERRYMAN_LANES"] == "migrations:2,default:1" and env["FERRYMAN_POOL_SIZE"] == "7"
    wait_state(release, "initech-crm", "Succeeded", 300, wait_for)
    check_against_truth(release.db_url, release.crm.truth(), workspace="initech")
    # the operator agreed with the chart: the Deployment rolled once, to one new ReplicaSet
    sets = release.get("replicasets", "-l", "app.kubernetes.io/component=worker")["items"]
    assert len(sets) == 2, [s["metadata"]["name"] for s in sets]


def test_helm_uninstall_leaves_only_the_crd(release: Release, wait_for: Any) -> None:
    release.helm("uninstall", RELEASE, "--wait")

    def nothing_left() -> bool:
        left = release.kubectl(
            "get",
            "all,configmap,serviceaccount,pdb,cronjob,job",
            "-l",
            f"app.kubernetes.io/instance={RELEASE}",
            "-o",
            "name",
        ).stdout
        return left.strip() == ""

    wait_for(nothing_left, timeout=120, interval=1.0)
    release.plane.kubectl("get", "crd", "migrationruns.ferryman.dev")
    assert release.get("migrationruns")["items"]  # the runs stay with the CRD


def test_a_failing_migration_fails_the_install_with_its_error(release: Release) -> None:
    namespace = f"{release.namespace}-bad"
    release.plane.kubectl("create", "namespace", namespace)
    try:
        closed = free_port()  # nothing listens there
        release.plane.kubectl(
            "create",
            "secret",
            "generic",
            "ferryman-database",
            "-n",
            namespace,
            f"--from-literal=url=postgresql://postgres@127.0.0.1:{closed}/none",
        )
        result = release.plane.helm(
            "install",
            "bad",
            str(CHART),
            "-n",
            namespace,
            *release.values,
            "--set",
            "migrate.backoffLimit=0",
            "--wait",
            "--timeout",
            "3m",
            check=False,
        )
        assert result.returncode != 0
        assert "pre-install" in result.stderr and "bad-ferryman-migrate" in result.stderr
        pods = release.plane.kubectl_json(
            "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/component=migrate"
        )["items"]
        message = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["message"]
        assert "cannot connect to PostgreSQL" in message and f"port {closed}" in message, message
        assert not release.plane.kubectl_json("get", "deployments", "-n", namespace)["items"]
    finally:
        release.plane.helm("uninstall", "bad", "-n", namespace, check=False)
        release.plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
