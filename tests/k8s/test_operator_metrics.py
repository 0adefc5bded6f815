"""The operator's /metrics, scraped from a real ``ferryman operator`` (under the chart's RBAC, on
the real control plane) while it admits, queues and refuses MigrationRuns that two real ``ferryman
worker`` processes import from the demo CRM with 5xx and 429s; parsed with prometheus_client's
parser and checked against the MigrationRuns on the API server, the database, the worker
Deployment the operator sized, the workers' own /metrics and the demo CRM's call counts.

The demo CRM throttles the first calls of the run's API key: its token budget alone answers 429
only to workers that outrun its refill, and on a loaded machine they need not (they also pace
themselves from its rate-limit headers)."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest
from faulty import TOKEN, faulty_crm
from net import free_port
from scrape import Samples, by, has, scrape, total
from tests.k8s import operator_bench
from tests.k8s.operator_bench import Bench, eventually, pool_objects, run_manifest

from ferryman_operator import metrics
from ferryman_worker import contract

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

SMALL = {"organizations": 300, "people": 100, "deals": 20}
THROTTLED = 2
"""The first calls of the run's API key the demo CRM answers 429, however slowly they come."""
REFUSED = 6
"""Runs of each refusal reason applied at once."""
STATES = ("Pending", "Queued", "Running", "Succeeded", "Failed", "Cancelled")


def states_on_the_api_server(bench: Bench) -> dict[str, float]:
    items = bench.cp.kubectl_json("get", "mrun", "-n", bench.namespace)["items"]
    found = collections.Counter((i.get("status") or {}).get("state") or "Pending" for i in items)
    return {state: float(found[state]) for state in STATES}


def runs_by_state(samples: Samples, namespace: str) -> dict[str, float]:
    return by(samples, "ferryman_operator_runs", "state", namespace=namespace)


def same_states(bench: Bench, port: int) -> dict[str, float]:
    """The operator's runs by state once they equal the MigrationRuns' (the index follows the
    watch, a moment behind a status write)."""

    def agree() -> dict[str, float] | None:
        seen = runs_by_state(scrape(port)[1], bench.namespace)
        return seen if seen == states_on_the_api_server(bench) else None

    result: dict[str, float] = eventually(agree, 15, "runs by state to match the API server")
    return result


def answered(stats: dict[str, Any], *statuses: str) -> int:
    return sum(n for counts in stats.values() for status, n in counts.items() if status in statuses)


def test_the_operators_metrics_match_the_runs_the_database_and_the_deployment(
    world: Bench,
    db_url: str,
) -> None:
    port, worker_ports = free_port(), [free_port(), free_port()]
    ns = world.release_ns
    objects = pool_objects(ns, "migrations:2,default:1", 1)
    listed = {"apiVersion": "v1", "kind": "List", "items": objects}
    world.cp.kubectl("apply", "-f", "-", input=json.dumps(listed))
    try:
        with faulty_crm(**SMALL, throttle_first=THROTTLED) as crm:
            world.secret(crm.api_key)
            world.operator(FERRYMAN_OPERATOR_METRICS_PORT=str(port))
            world.apply(run_manifest("first", crm.url))
            world.apply(run_manifest("second", crm.url, kinds=["organizations", "people"]))
            world.apply(run_manifest("rejected", crm.url, conflictPolicy="Reject"))
            nowhere = run_manifest("nowhere", crm.url, workspace="elsewhere")
            nowhere["spec"]["source"]["provider"] = "nowhere"
            world.apply(nowhere)
            # no worker yet: first stays admitted, second queued behind it, rejected refused,
            # nowhere refused: no MigrationProvider and no built-in provider of that name
            world.wait_state("second", "Queued", timeout=30)
            world.wait_state("rejected", "Failed", timeout=30)
            world.wait_state("nowhere", "Failed", timeout=30)
            queued = same_states(world, port)
            assert queued == {**dict.fromkeys(STATES, 0.0), "Running": 1, "Queued": 1, "Failed": 2}
            _, during = scrape(port)
            [age] = [v for (n, ls), v in during.items() if n.endswith("queued_oldest_seconds")]
            assert has(during, "ferryman_operator_queued_oldest_seconds", workspace="acme")
            assert 0 < age < 120

            world.workers(2, ports=worker_ports)
            world.wait_state("first", "Succeeded", timeout=180)
            second = world.wait_state("second", "Succeeded", timeout=180)
            ended = same_states(world, port)
            text, after = scrape(port)
            workers = [scrape(p)[1] for p in worker_ports]  # the first look after the runs ended
            stats = crm.stats()["requests"]
            deployment = world.cp.kubectl_json("get", "deployment", "ferryman-worker", "-n", ns)
    finally:
        listed = {"apiVersion": "v1", "kind": "List", "items": objects}
        world.cp.kubectl("delete", "-f", "-", input=json.dumps(listed), check=False)

    assert ended == {**dict.fromkeys(STATES, 0.0), "Succeeded": 2, "Failed": 2}
    assert not has(after, "ferryman_operator_queued_oldest_seconds")
    assert TOKEN not in text and "password" not in text.lower()
    assert total(after, "ferryman_operator_leader") == 1

    # admissions: the runs the database holds; refusals: the Reject run's WorkspaceBusy and
    # the missing provider's ProviderNotFound, each reason a label of its own
    with contract.connect(db_url) as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM ferryman_runs WHERE name LIKE %s", (f"{world.namespace}/%",)
        ).fetchone()
        written = conn.execute(
            "SELECT r.name, sum(t.rows_written) AS n FROM ferryman_tasks t"
            " JOIN ferryman_runs r ON r.id = t.run_id GROUP BY r.name"
        ).fetchall()
    assert row is not None and row["n"] == 2
    assert total(after, "ferryman_operator_admissions_total") == row["n"]
    assert by(after, "ferryman_operator_refusals_total", "reason") == {
        **dict.fromkeys(metrics.REFUSALS, 0.0),
        "WorkspaceBusy": 1,
        "ProviderNotFound": 1,
        "Other": 0,
    }
    assert total(after, "ferryman_operator_reconcile_errors_total") == 0

    # the sizing gauges: what the operator wrote into the Deployment
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    pool = {"namespace": ns, "pool": "ferryman"}
    assert total(after, "ferryman_operator_sizing_fits", **pool) == 1
    assert (
        total(after, "ferryman_operator_sizing_replicas", **pool) == deployment["spec"]["replicas"]
    )
    assert total(after, "ferryman_operator_sizing_pool_size", **pool) == int(
        env["FERRYMAN_POOL_SIZE"]
    )
    lanes = {p.split(":")[0]: float(p.split(":")[1]) for p in env["FERRYMAN_LANES"].split(",")}
    assert by(after, "ferryman_operator_sizing_lane_threads", "lane", **pool) == lanes

    # the workers: rows per run as the tasks and the status say, calls as the demo CRM counted
    rows = {r["name"]: r["n"] for r in written}
    for name in ("first", "second"):
        key = f"{world.namespace}/{name}"
        got = sum(total(w, "ferryman_rows_total", run=key, outcome="written") for w in workers)
        assert got == rows[key], (name, got, rows[key])
    assert rows[f"{world.namespace}/second"] == second["rowsWritten"]
    calls = collections.Counter[str]()
    for w in workers:
        calls.update(by(w, "ferryman_source_calls_total", "outcome"))
    assert calls["2xx"] == answered(stats, "200")
    assert calls["429"] == answered(stats, "429") >= THROTTLED
    assert calls["5xx"] == answered(stats, "500", "502", "503") > 0


def test_each_refusal_counts_once_when_runs_are_refused_as_the_refresh_meets_them(
    world: Bench,
) -> None:
    """Runs refused as soon as they are created, many at once: a refresh that began while they
    were new may meet them only after a handler refused them (and their end made the operator
    forget what it wrote); it decides each from its object as it is then, and each refusal counts
    once."""
    port = free_port()
    world.secret("any-token")
    world.operator(FERRYMAN_OPERATOR_METRICS_PORT=str(port))
    world.apply(run_manifest("holder", "http://127.0.0.1:9", workspace="busy"))
    world.wait_state("holder", "Running", timeout=30)
    busy = [
        run_manifest(f"busy-{i}", "http://127.0.0.1:9", workspace="busy", conflictPolicy="Reject")
        for i in range(REFUSED)
    ]
    nowhere = [
        run_manifest(f"nowhere-{i}", "http://127.0.0.1:9", workspace=f"w{i}")
        for i in range(REFUSED)
    ]
    for run in nowhere:
        run["spec"]["source"]["provider"] = "nowhere"
    world.apply({"apiVersion": "v1", "kind": "List", "items": [*busy, *nowhere]})
    for run in (*busy, *nowhere):
        world.wait_state(run["metadata"]["name"], "Failed", timeout=60)

    def refreshes() -> float:
        return total(scrape(port)[1], "ferryman_operator_refreshes_total")

    began = refreshes()  # the refresh under way now ends before the next one begins
    eventually(lambda: refreshes() > began, 30, "the next refresh")
    assert by(scrape(port)[1], "ferryman_operator_refusals_total", "reason") == {
        **dict.fromkeys((*metrics.REFUSALS, "Other"), 0.0),
        "WorkspaceBusy": REFUSED,
        "ProviderNotFound": REFUSED,
    }
    assert total(scrape(port)[1], "ferryman_operator_admissions_total") == 1


def test_database_outages_count_as_reconcile_errors_of_the_handler_that_met_them(
    world: Bench,
    tmp_path: Path,
    db_url: str,
) -> None:
    port = free_port()
    proxy = operator_bench.SocketProxy(db_url, tmp_path / "proxy")
    try:
        world.operator(FERRYMAN_DATABASE_URL=proxy.url, FERRYMAN_OPERATOR_METRICS_PORT=str(port))
        world.secret("any-token")
        world.apply(run_manifest("parked", "http://127.0.0.1:9", suspend=True))
        world.wait_state("parked", "Running", timeout=30)
        assert total(scrape(port)[1], "ferryman_operator_reconcile_errors_total") == 0
        proxy.cut()
        errors = eventually(
            lambda: (
                total(scrape(port)[1], "ferryman_operator_reconcile_errors_total", error="database")
                >= 2
            ),
            30,
            "database errors counted",
        )
        assert errors
        _, down = scrape(port)
        assert by(down, "ferryman_operator_reconcile_errors_total", "error") == {
            "database": total(down, "ferryman_operator_reconcile_errors_total")
        }
        assert total(down, "ferryman_operator_reconcile_errors_total", handler="refresh") >= 1
    finally:
        proxy.restore()
    eventually(
        lambda: "DatabaseUnavailable" not in json.dumps(world.status("parked")["conditions"]),
        30,
        "the operator to recover",
    )
    proxy.cut()
