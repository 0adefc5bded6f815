"""The operator on the real control plane: ``kubectl apply`` a MigrationRun, the operator (under
the chart's RBAC) admits it into a real PostgreSQL, two ``ferryman worker`` processes import the
demo CRM, and ``kubectl get migrationruns`` shows it."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from migration import check_against_truth
from tests.democrm.server_fixture import DemoCRM
from tests.k8s import operator_bench
from tests.k8s.operator_bench import Bench, eventually, run_manifest

pytestmark = pytest.mark.k8s

DATA = {"seed": 7, "organizations": 240, "people": 160, "deals": 24, "messages_per_deal": 2}
KINDS = ("organizations", "people", "deals", "messages")


@pytest.fixture(scope="module")
def release(
    controlplane: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """The CRD, and the chart's operator RBAC in a release namespace: (namespace, kubeconfig)."""
    operator_bench.install_crd(controlplane)
    namespace = f"ferryman-{uuid.uuid4().hex[:6]}"
    controlplane.kubectl("create", "namespace", namespace)
    home = tmp_path_factory.mktemp("operator")
    yield namespace, operator_bench.install_operator_rbac(controlplane, namespace, home)
    controlplane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.fixture
def world(
    controlplane: Any, release: tuple[str, Path], namespace: str, db_url: str, tmp_path: Path
) -> Iterator[Bench]:
    with operator_bench.bench(controlplane, *release, namespace, db_url, tmp_path) as bench:
        yield bench


@contextlib.contextmanager
def states_of(bench: Bench, name: str) -> Iterator[list[str]]:
    """Every state the run's watch shows, in order (kubectl get --watch)."""
    seen: list[str] = []
    argv = [
        str(bench.cp.kubectl_path),
        "get",
        "mrun",
        name,
        "-n",
        bench.namespace,
        "--watch",
        "-o",
        'jsonpath={.status.state}{"\\n"}',
    ]
    with subprocess.Popen(
        argv, env=bench.cp.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as proc:

        def read() -> None:
            for line in proc.stdout or ():
                state = line.strip()
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


def table(bench: Bench, *args: str) -> list[dict[str, str]]:
    """``kubectl get migrationruns`` as rows of {COLUMN: cell}."""
    text = bench.cp.kubectl("get", "migrationruns", "-n", bench.namespace, *args).stdout
    header, *rows = text.splitlines()
    starts = [header.index(word) for word in header.split()]
    cut = [*starts[1:], None]
    return [
        {
            header[s:e].strip() if e else header[s:].strip(): row[s:e].strip()
            for s, e in zip(starts, cut, strict=True)
        }
        for row in rows
    ]


def test_the_example_run_goes_pending_running_succeeded_and_kubectl_shows_its_counts(
    world: Bench, db_url: str
) -> None:
    with DemoCRM.start(**DATA) as crm:
        world.secret(crm.api_key)
        world.operator()
        world.workers(2)
        manifest = run_manifest("acme-crm", crm.url, example=True)
        with states_of(world, "acme-crm") as seen:
            world.apply(manifest)
            final = world.wait_state("acme-crm", "Succeeded", timeout=120)
            eventually(lambda: seen[-1:] == ["Succeeded"], 10, "the watch to see Succeeded")
        truth = crm.truth()
    assert seen == ["Pending", "Running", "Succeeded"]
    check_against_truth(db_url, truth)
    expected = sum(len(set(truth[k]["ids"]) - set(truth[k]["malformed"])) for k in KINDS)
    malformed = sum(len(truth[k]["malformed"]) for k in KINDS)
    assert final["rowsWritten"] == expected and final["rowsFailed"] == malformed

    [row] = table(world)
    assert list(row) == ["NAME", "WORKSPACE", "STATE", "PHASE", "TASKS", "ROWS", "AGE"]
    done, total = row["TASKS"].split("/")
    assert row["NAME"] == "acme-crm" and row["WORKSPACE"] == "acme" and row["STATE"] == "Succeeded"
    assert row["PHASE"] == "<none>" and done == total and int(total) > 4
    assert row["ROWS"] == str(expected)
    [wide] = table(world, "-o", "wide")
    assert list(wide)[-3:] == ["SKIPPED", "FAILED", "MESSAGE"]
    assert wide["SKIPPED"] == "0" and wide["FAILED"] == str(malformed)
    assert wide["MESSAGE"].startswith(f"succeeded: {expected} rows written, {malformed} malformed")

    conditions = {c["type"]: c for c in final["conditions"]}
    assert {k: c["status"] for k, c in conditions.items()} == {
        "Admitted": "True",
        "Progressing": "False",
        "Complete": "True",
        "Failed": "False",
        "WorkersReady": "Unknown",
    }
    assert conditions["Complete"]["reason"] == "Succeeded"
    assert final["observedGeneration"] == 1 and final["startedAt"] and final["finishedAt"]
    reasons = world.reasons("acme-crm")
    assert reasons[0] == "Admitted" and reasons[-1] == "Succeeded"
    assert reasons.count("PhaseStarted") >= 2
