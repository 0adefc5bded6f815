#!/usr/bin/env python3
"""Benchmark of the operator's cost against the number of MigrationRuns: 10 live runs alone,
then the same 10 live among 1,000 finished runs and 100 queued ones.

On a real control plane (`hack/controlplane up`, no node; binaries built if needed) with the
operator under the chart's RBAC and two real `ferryman worker` processes (as the operator tests
run them), against a PostgreSQL 15 of the system's packages started here with
pg_stat_statements (the embedded server has no such module); the operator connects as a role
of its own, so its statements are told from the workers'. The live runs read a slow demo CRM
(a second per page) and last the whole benchmark.

Each case is measured over a window (``--window`` seconds) in which nothing but the operator
and the workers acts: the operator's CPU-seconds (``/proc/<pid>/stat``), its database
statements (pg_stat_statements, by its role; every role's in the table too) and the API
server's requests (its own ``apiserver_request_total``: those on MigrationRuns and Events, the
objects a refresh reads and writes; every request in the table too), each per minute. Then
the time from `kubectl apply` to the Admitted condition of ``--samples`` new runs, one after
another, each in a free workspace (a watch sees the condition).

The 1,000 finished runs are real runs: applied in batches, admitted by the operator, run by
the workers against a second demo CRM holding five organizations, and finished; nothing is
forged. The 100 queued runs wait behind the live runs of their workspaces.

Prints the figures of each case, then as its LAST line one JSON object with
operator_cpu_ratio_1000_vs_10, db_statements_ratio_1000_vs_10, api_requests_ratio_1000_vs_10,
admission_p50_s, admission_p99_s (with the 100 queued), refresh_interval_s, the figures of both
cases and load_average (the 1-minute load average at the end).

    .venv/bin/python hack/bench/operator.py [--finished 1000] [--queued 100] [--window 120]
"""

import sys

# Run as a script, this file's folder comes first on sys.path, where this file would shadow the
# standard library's `operator` (which argparse, re and enum import): drop the folder first.
if sys.path and sys.path[0].rstrip("/").endswith("hack/bench"):
    del sys.path[0]

import argparse
import contextlib
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]
sys.path.append(str(ROOT / "hack" / "bench"))  # appended: queue.py there must not shadow queue

import meter  # noqa: E402
from net import free_port  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402
from tests.democrm.server_fixture import DemoCRM  # noqa: E402
from tests.k8s import operator_bench  # noqa: E402
from tests.k8s.conftest import ControlPlane  # noqa: E402

from ferryman_worker.db import connect, databases, migrate  # noqa: E402

PG_BIN = Path("/usr/lib/postgresql/15/bin")
CONTROLPLANE = ROOT / "hack" / "controlplane"
OPERATOR_ROLE = "bench_operator"
REFRESH_RESOURCES = ("migrationruns", "events")
LIVE = 10
SLOW: dict[str, Any] = {
    "seed": 5,
    "organizations": 20000,
    "people": 0,
    "deals": 0,
    "latency_ms": 1000,
}
"""2,000 pages of ten a second each: a live run outlasts the benchmark."""
TINY: dict[str, Any] = {"seed": 6, "organizations": 5, "people": 0, "deals": 0}
ORGS: dict[str, Any] = {"kinds": ["organizations"], "options": {"pageSize": 10, "stripes": 1}}


# -- PostgreSQL with pg_stat_statements --------------------------------------------------------


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A PostgreSQL 15 cluster with pg_stat_statements on a loopback port, trusting local
    connections, run as the system's postgres user; its admin URL. Deleted afterwards."""
    if not (PG_BIN / "postgres").exists():
        raise SystemExit("needs PostgreSQL 15 (apt-get install postgresql-15)")
    folder = Path(tempfile.mkdtemp(prefix="ferryman-bench-pg-"))
    entry = pwd.getpwnam("postgres")
    os.chown(folder, entry.pw_uid, entry.pw_gid)
    data, port = folder / "data", free_port()

    def as_postgres(*argv: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=True, capture_output=True)

    as_postgres(str(PG_BIN / "initdb"), "--auth=trust", "-U", "postgres", "-D", str(data))
    options = (
        f"-h 127.0.0.1 -p {port} -k {folder} -c shared_preload_libraries=pg_stat_statements"
        " -c max_connections=200 -c pg_stat_statements.max=10000"
    )
    log = str(folder / "log")
    as_postgres(str(PG_BIN / "pg_ctl"), "-w", "-D", str(data), "-o", options, "-l", log, "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        as_postgres(str(PG_BIN / "pg_ctl"), "-w", "-D", str(data), "-m", "fast", "stop")
        shutil.rmtree(folder, ignore_errors=True)


def database(admin_url: str) -> tuple[str, str]:
    """A migrated database with pg_stat_statements: the workers' URL and the operator's."""
    url = databases.create(admin_url, "ferryman")
    with connect.connect(url) as conn:
        migrate.migrate(conn)
        conn.execute("CREATE EXTENSION pg_stat_statements")
        conn.execute(f"CREATE ROLE {OPERATOR_ROLE} LOGIN SUPERUSER")
    return url, make_conninfo(url, user=OPERATOR_ROLE)


def statements(url: str) -> tuple[float, float]:
    """Statements run so far: the operator's role's, and every role's."""
    with connect.connect(url) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(calls) FILTER (WHERE userid = %s::regrole), 0) AS mine,"
            " coalesce(sum(calls), 0) AS every FROM pg_stat_statements",
            (OPERATOR_ROLE,),
        ).fetchone()
    assert row is not None
    return float(row["mine"]), float(row["every"])


# -- the control plane -------------------------------------------------------------------------


@contextlib.contextmanager
def controlplane(scratch: Path) -> Iterator[ControlPlane]:
    state = scratch / "state"
    up = [str(CONTROLPLANE), "up", "--state-dir", str(state), "--watch-pid", str(os.getpid())]
    result = subprocess.run(up, capture_output=True, text=True, check=False, timeout=3600)
    if result.returncode != 0:
        raise SystemExit(f"hack/controlplane up failed:\n{result.stderr}")
    try:
        yield ControlPlane.load(state, scratch / "home")
    finally:
        down = [str(CONTROLPLANE), "down", "--state-dir", str(state)]
        subprocess.run(down, capture_output=True, check=False, timeout=300)


def api_requests(cp: ControlPlane) -> tuple[float, float]:
    """The API server's requests so far: on MigrationRuns and Events, and in all."""
    text = cp.kubectl("get", "--raw", "/metrics").stdout
    mine = every = 0.0
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if sample.name == "apiserver_request_total":
                every += sample.value
                mine += sample.value * (sample.labels.get("resource") in REFRESH_RESOURCES)
    return mine, every


# -- the runs ----------------------------------------------------------------------------------


class Admissions:
    """Watches the namespace's MigrationRuns and notes when each first shows Admitted=True."""

    def __init__(self, cp: ControlPlane, namespace: str) -> None:
        from kubernetes import config

        self._api = config.new_client_from_config(config_file=str(cp.kubeconfig))
        self._namespace = namespace
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        from kubernetes import client, watch

        custom = client.CustomObjectsApi(self._api)
        watcher = watch.Watch()  # each stream goes on from the last resourceVersion seen
        while not self._stop.is_set():
            for event in watcher.stream(
                custom.list_namespaced_custom_object,
                "ferryman.dev",
                "v1alpha1",
                self._namespace,
                "migrationruns",
                timeout_seconds=10,
            ):
                run = event["object"]
                conditions = (run.get("status") or {}).get("conditions") or []
                if any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions):
                    self.seen.setdefault(run["metadata"]["name"], time.monotonic())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def latencies(world: operator_bench.Bench, crm: DemoCRM, label: str, count: int) -> list[float]:
    """Seconds from `kubectl apply` to Admitted of ``count`` new runs, one after another (a watch
    sees the condition; it has seen the live runs admitted before the first is applied)."""
    seen = Admissions(world.cp, world.namespace)
    try:
        operator_bench.eventually(admitted(seen, "live-0"), 60, "the watch to list the runs")
        found = []
        for number in range(count):
            name = f"probe-{label}-{number}"
            began = time.monotonic()
            world.apply(operator_bench.run_manifest(name, crm.url, workspace=name, **ORGS))
            operator_bench.eventually(admitted(seen, name), 60, f"{name} admitted", interval=0.02)
            found.append(seen.seen[name] - began)
        return found
    finally:
        seen.stop()


def admitted(seen: Admissions, name: str) -> Callable[[], bool]:
    return lambda: name in seen.seen


def manifest(prefix: str, number: int, crm: DemoCRM, workspace: str) -> dict[str, Any]:
    return operator_bench.run_manifest(f"{prefix}-{number}", crm.url, workspace=workspace, **ORGS)


def many(world: operator_bench.Bench, manifests: list[dict[str, Any]], batch: int = 100) -> None:
    """Apply ``manifests`` in Lists of ``batch``."""
    for start in range(0, len(manifests), batch):
        items = [
            {**m, "metadata": {**m["metadata"], "namespace": world.namespace}}
            for m in manifests[start : start + batch]
        ]
        world.apply({"apiVersion": "v1", "kind": "List", "items": items})


def states(world: operator_bench.Bench) -> dict[str, str | None]:
    found = world.cp.kubectl_json("get", "mrun", "-n", world.namespace)
    return {i["metadata"]["name"]: (i.get("status") or {}).get("state") for i in found["items"]}


def wait_states(
    world: operator_bench.Bench, prefix: str, state: str, count: int, timeout: float
) -> None:
    def reached() -> bool:
        got = [s for name, s in states(world).items() if name.startswith(prefix)]
        return len(got) == count and all(s == state for s in got)

    operator_bench.eventually(reached, timeout, f"{count} {prefix}* runs {state}", interval=5)


def measure(cp: ControlPlane, operator_pid: int, db_url: str, window: float) -> dict[str, float]:
    """The operator's costs per minute over the next ``window`` seconds (the database read as
    another role than the operator's)."""
    before = (meter.proc_cpu(operator_pid), statements(db_url), api_requests(cp))
    began = time.monotonic()
    time.sleep(window)  # the measurement window: the operator and the workers act alone
    minutes = (time.monotonic() - began) / 60
    after = (meter.proc_cpu(operator_pid), statements(db_url), api_requests(cp))
    return {
        "operator_cpu_s_per_min": (after[0] - before[0]) / minutes,
        "db_statements_per_min": (after[1][0] - before[1][0]) / minutes,
        "db_statements_all_roles_per_min": (after[1][1] - before[1][1]) / minutes,
        "api_requests_per_min": (after[2][0] - before[2][0]) / minutes,
        "api_requests_all_per_min": (after[2][1] - before[2][1]) / minutes,
    }


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def bench(
    args: argparse.Namespace, cp: ControlPlane, urls: tuple[str, str], scratch: Path
) -> dict[str, Any]:
    db_url, operator_url = urls
    operator_bench.install_crd(cp)
    release = f"ferryman-{uuid.uuid4().hex[:6]}"
    cp.kubectl("create", "namespace", release)
    home = scratch / "operator"
    home.mkdir()
    kubeconfig = operator_bench.install_operator_rbac(cp, release, home)
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    cp.kubectl("create", "namespace", namespace)
    with (
        operator_bench.bench(cp, release, kubeconfig, namespace, db_url, scratch) as world,
        DemoCRM.start(**SLOW) as slow,
        DemoCRM.start(**TINY) as tiny,
    ):
        world.secret(slow.api_key)
        operator = world.operator(
            FERRYMAN_DATABASE_URL=operator_url,
            FERRYMAN_OPERATOR_STATUS_INTERVAL=str(args.interval),
            FERRYMAN_OPERATOR_LEASE_DURATION="15",
            FERRYMAN_OPERATOR_POOL_INTERVAL="10",
            wait=False,
        )
        world.wait_leader(operator, timeout=180)  # a loaded machine starts Python slowly
        world.workers(2, lanes="migrations:8")
        pid = operator.proc.pid
        many(world, [manifest("live", n, slow, f"w{n}") for n in range(LIVE)])
        wait_states(world, "live-", "Running", LIVE, 120)
        time.sleep(args.interval * 2)  # the admissions' Events and patches are behind us
        alone = measure(cp, pid, db_url, args.window)
        say("10 live", alone)
        alone_latency = latencies(world, tiny, "alone", args.samples)
        many(world, [manifest("done", n, tiny, f"d{n}") for n in range(args.finished)])
        wait_states(world, "done-", "Succeeded", args.finished, 3600)
        many(world, [manifest("queued", n, tiny, f"w{n % LIVE}") for n in range(args.queued)])
        wait_states(world, "queued-", "Queued", args.queued, 600)
        wait_states(world, "probe-alone-", "Succeeded", args.samples, 600)
        time.sleep(args.interval * 2)
        crowd = measure(cp, pid, db_url, args.window)
        say(f"10 live among {args.finished} finished and {args.queued} queued", crowd)
        crowd_latency = latencies(world, tiny, "crowd", args.samples)
        live = [state for name, state in states(world).items() if name.startswith("live-")]
        assert live == ["Running"] * LIVE, live
    return {
        "operator_cpu_ratio_1000_vs_10": ratio(crowd, alone, "operator_cpu_s_per_min"),
        "db_statements_ratio_1000_vs_10": ratio(crowd, alone, "db_statements_per_min"),
        "api_requests_ratio_1000_vs_10": ratio(crowd, alone, "api_requests_per_min"),
        "admission_p50_s": round(percentile(crowd_latency, 0.5), 3),
        "admission_p99_s": round(percentile(crowd_latency, 0.99), 3),
        "admission_alone_p50_s": round(percentile(alone_latency, 0.5), 3),
        "admission_alone_p99_s": round(percentile(alone_latency, 0.99), 3),
        "refresh_interval_s": args.interval,
        "alone": {k: round(v, 2) for k, v in alone.items()},
        "crowd": {k: round(v, 2) for k, v in crowd.items()},
        "finished": args.finished,
        "queued": args.queued,
    }


def ratio(crowd: dict[str, float], alone: dict[str, float], key: str) -> float:
    return round(crowd[key] / alone[key], 3) if alone[key] else float("inf")


def say(case: str, figures: dict[str, float]) -> None:
    line = ", ".join(f"{key} {value:.1f}" for key, value in figures.items())
    print(f"{case}: {line} (load {os.getloadavg()[0]:.2f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--finished", type=int, default=1000)
    parser.add_argument("--queued", type=int, default=100)
    parser.add_argument("--window", type=float, default=120.0, help="seconds measured per case")
    parser.add_argument("--samples", type=int, default=40, help="admissions timed per case")
    parser.add_argument("--interval", type=float, default=5.0, help="the status interval")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ferryman-bench-operator-"))
    try:
        with postgres() as admin_url, controlplane(scratch) as cp:
            result = bench(args, cp, database(admin_url), scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({**result, "load_average": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
