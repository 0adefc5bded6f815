"""The Grafana dashboard the chart ships: every panel's query names metrics the worker or the
operator exports, grouped by labels those metrics have."""

from __future__ import annotations

import json
import pathlib
import re

from prometheus_client.parser import text_string_to_metric_families

from ferryman_operator import metrics as operator_metrics
from ferryman_operator.reconcile import pool
from ferryman_operator.reconcile.admission import Candidate
from ferryman_worker import metrics
from ferryman_worker.contract import ConnectionBudget
from ferryman_worker.engine import windows

DASHBOARD = pathlib.Path(__file__).parents[2] / "charts/ferryman/dashboards/ferryman.json"


def exported() -> dict[str, set[str]]:
    """Every sample name the worker exports, with its labels: each hook called once, then the
    exposition parsed (the queue depths' families given a row, as a scrape would read)."""
    metrics.enable()
    try:
        metrics.lanes({"migrations": 4})
        metrics.job_ended(metrics.job_started("migrations", "ferryman.task", 0.002), "retrying")
        metrics.window((1, "ns/run"), "people", windows.Counts(written=50, failed=1), 0.01)
        metrics.source_call("c0ffee", 200, False, 0.02)
        metrics.tokens("c0ffee", leased=100, spent=20)
        metrics.token_wait("c0ffee", 0.5)
        metrics.paused("c0ffee", 1.0)
        text = metrics.exposition()[0].decode()
    finally:
        metrics.disable()
    row = {"queue": "migrations", "ready": 1, "scheduled": 0, "oldest_ready_seconds": 0.0}
    families = [
        *text_string_to_metric_families(text),
        *metrics.QueueDepth._families([row]),
    ]
    families += text_string_to_metric_families(operator_exposition())
    names: dict[str, set[str]] = {}
    for family in families:
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


def operator_exposition() -> str:
    """The operator's exposition with each hook called once and a queued run in its index."""
    seen = operator_metrics.OperatorMetrics()
    seen.leading(True)
    seen.status_changed(
        {}, {"state": "Running", "conditions": [{"type": "Admitted", "status": "True"}]}
    )
    seen.reconcile_error("refresh", "database down")
    seen.runs.follow({"acme": [Candidate("2026-12-01T00:00:00Z", "ns/run", "acme", "Queued")]})
    budget = ConnectionBudget(max_connections=100, superuser_reserved=3, reserved=0)
    spec = pool.parse({"lanes": "migrations:4", "replicas": "2"})
    seen.sizing.set("ns", "ferryman", pool.size(spec, budget))
    return seen.exposition().decode()


def panels() -> list[dict[str, object]]:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "ferryman" and dashboard["panels"]
    return list(dashboard["panels"])


def test_every_panel_queries_metrics_that_exist_by_labels_they_have() -> None:
    known = exported()
    used = set()
    for panel in panels():
        targets = panel["targets"]
        assert isinstance(targets, list) and targets, panel["title"]
        for target in targets:
            expr = target["expr"]
            names = re.findall(r"\bferryman_[a-z0-9_]+", expr)
            assert names, (panel["title"], expr)
            for name in names:
                assert name in known, f"{panel['title']}: {name} is not a metric ferryman exports"
                used.add(name)
            grouped = {
                label.strip()
                for group in re.findall(r"\bby \(([^)]*)\)", expr)
                for label in group.split(",")
            }
            for name in names:
                missing = grouped - known[name]
                assert not missing, f"{panel['title']}: {name} has no label {missing}"
    assert "ferryman_queue_ready_jobs" in used and "ferryman_rows_total" in used
    operator = {
        n for n in known if n.startswith("ferryman_operator_") and not n.endswith("_created")
    }
    assert operator - {"ferryman_operator_leader"} <= used, "an operator metric on no panel"


def test_panel_ids_are_unique() -> None:
    ids = [panel["id"] for panel in panels()]
    assert len(ids) == len(set(ids))
