"""The chart's metrics objects (metrics.*): the workers' and the operator's metrics Services, the
ServiceMonitor that selects both, and the Grafana dashboard ConfigMap, rendered by the real helm
and checked against the Deployments they point at; the Services and the ConfigMap are created on
the API server (the ServiceMonitor's CRD, prometheus-operator's, is not installed there)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.k8s

CHART = Path(__file__).resolve().parents[2] / "charts" / "ferryman"
ON = (
    "--set",
    "metrics.serviceMonitor.enabled=true",
    "--set",
    "metrics.dashboard.enabled=true",
    "--set",
    "metrics.serviceMonitor.labels.release=kube-prometheus",
)


def render(controlplane: Any, *args: str) -> list[dict[str, Any]]:
    out = controlplane.helm("template", "fm", str(CHART), "-n", "ns1", *args).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and "metrics" in _role(o)]
    return found


def _role(o: dict[str, Any]) -> str:
    name = o["metadata"]["name"]
    return (
        "metrics"
        if name.endswith(("-metrics", "-dashboard")) or o["kind"] == "ServiceMonitor"
        else ""
    )


def test_nothing_of_it_by_default(controlplane: Any) -> None:
    objects = render(controlplane)
    assert not [o for o in objects if o["kind"] == "ServiceMonitor" or _role(o)]


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector (matchLabels, matchExpressions In/Exists) applied to ``labels``."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        value = labels.get(expression["key"])
        if expression["operator"] == "In" and value not in expression["values"]:
            return False
        if expression["operator"] == "Exists" and value is None:
            return False
    return True


@pytest.mark.parametrize(
    ("component", "port_value"),
    [("worker", "worker.metricsPort"), ("operator", "operator.metricsPort")],
)
def test_the_service_monitor_selects_the_services_that_select_the_workers_and_the_operator(
    controlplane: Any, component: str, port_value: str
) -> None:
    objects = render(controlplane, *ON, "--set", f"{port_value}=9100")
    [deployment] = [
        o
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"]["name"] == f"fm-ferryman-{component}"
    ]
    pod = deployment["spec"]["template"]
    [container] = [c for c in pod["spec"]["containers"] if c["name"] == component]
    services = [o for o in objects if o["kind"] == "Service" and _role(o)]
    assert {s["metadata"]["name"] for s in services} == {
        "fm-ferryman-worker-metrics",
        "fm-ferryman-operator-metrics",
    }
    [service] = [s for s in services if s["metadata"]["name"] == f"fm-ferryman-{component}-metrics"]
    others = [s for s in services if s is not service]
    monitor = one(objects, "ServiceMonitor")
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert not any(
        s["spec"]["selector"].items() <= pod["metadata"]["labels"].items() for s in others
    )
    [port] = service["spec"]["ports"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert named[port["targetPort"]] == port["port"] == 9100
    assert all(selects(monitor["spec"]["selector"], s["metadata"]["labels"]) for s in services)
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] == port["name"] and endpoint["path"] == "/metrics"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == ["ns1"]
    if component == "operator":
        args = container["args"]
        assert args[args.index("--metrics-port") + 1] == "9100"


def test_the_dashboard_configmap_carries_the_dashboard_file(controlplane: Any) -> None:
    config = one(render(controlplane, *ON), "ConfigMap")
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads(config["data"]["ferryman.json"])
    assert shipped == json.loads((CHART / "dashboards" / "ferryman.json").read_text())
    elsewhere = render(controlplane, *ON, "--set", "metrics.dashboard.namespace=monitoring")
    assert one(elsewhere, "ConfigMap")["metadata"]["namespace"] == "monitoring"


def test_lint_passes_and_the_api_server_takes_the_service_and_configmap(
    controlplane: Any, namespace: str
) -> None:
    lint = controlplane.helm("lint", "--strict", str(CHART), *ON)
    assert "0 chart(s) failed" in lint.stdout, lint.stdout
    out = controlplane.helm("template", "fm", str(CHART), "-n", namespace, *ON).stdout
    wanted = [
        o
        for o in yaml.safe_load_all(out)
        if o and o["kind"] in ("Service", "ConfigMap") and _role(o)
    ]
    assert len(wanted) == 3
    created = controlplane.kubectl(
        "apply", "-n", namespace, "-f", "-", input=yaml.safe_dump_all(wanted)
    )
    assert created.returncode == 0, created.stderr
    got = controlplane.kubectl_json("get", "service,configmap", "-n", namespace)
    names = {item["metadata"]["name"] for item in got["items"]}
    assert {
        "fm-ferryman-worker-metrics",
        "fm-ferryman-operator-metrics",
        "fm-ferryman-dashboard",
    } <= names


def test_a_bad_scrape_interval_is_refused_naming_the_field(controlplane: Any) -> None:
    result = controlplane.helm(
        "template", "fm", str(CHART), "--set", "metrics.serviceMonitor.interval=often", check=False
    )
    assert result.returncode != 0 and "interval" in result.stderr, result.stderr
