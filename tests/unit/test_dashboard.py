"""The Grafana dashboard the chart ships: every panel's query names metrics the worker exports,
grouped by labels those metrics have."""

from __future__ import annotations

import json
import pathlib
import re

from prometheus_client.metrics import MetricWrapperBase

from ferryman_worker import metrics

DASHBOARD = pathlib.Path(__file__).parents[2] / "charts/ferryman/dashboards/ferryman.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def exported() -> dict[str, set[str]]:
    """Every sample name the worker exports, with its labels (histograms' ``le`` included)."""
    names: dict[str, set[str]] = {}
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            labels = set(value._labelnames)
            for suffix in SUFFIXES[value._type]:
                names[value._name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    for family in metrics.QueueDepth._families([]):
        names[family.name] = {"queue"}
    return names


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
                assert name in known, f"{panel['title']}: {name} is not a metric the worker exports"
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


def test_panel_ids_are_unique() -> None:
    ids = [panel["id"] for panel in panels()]
    assert len(ids) == len(set(ids))
