"""The operator's metrics without a cluster: what a status transition counts, how errors are
classed, runs by state and queued ages counted from an index like kopf's, and the sizing gauges
(their series go when they no longer apply). Read back through prometheus_client's parser."""

from __future__ import annotations

import ast
import asyncio
import datetime
import pathlib
from typing import Any

import httpx
import pytest
from kubernetes.client import ApiException
from net import free_port
from prometheus_client.parser import text_string_to_metric_families

from ferryman_operator import metrics, settings
from ferryman_operator.errors import DatabaseUnavailable, SettingsError
from ferryman_operator.reconcile import pool
from ferryman_operator.reconcile.admission import Candidate
from ferryman_worker import cli
from ferryman_worker.contract import ConnectionBudget

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(seen: metrics.OperatorMetrics) -> Samples:
    text = seen.exposition().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("ferryman_")
    }


def status(state: str, admitted: str | None, reason: str = "Admitted") -> dict[str, Any]:
    conditions = (
        []
        if admitted is None
        else [{"type": "Admitted", "status": admitted, "reason": reason, "message": ""}]
    )
    return {"state": state, "conditions": conditions}


@pytest.mark.parametrize(
    ("old", "new", "counted"),
    [
        ({}, status("Running", "True"), "admitted"),
        (status("Queued", "False", "WorkspaceBusy"), status("Running", "True"), "admitted"),
        (status("Running", "True"), status("Running", "True"), None),
        (status("Running", "True"), status("Succeeded", "True"), None),
        ({}, status("Queued", "False", "WorkspaceBusy"), None),
        ({}, status("Failed", "False", "WorkspaceBusy"), "WorkspaceBusy"),
        ({}, status("Failed", "False", "InvalidSpec"), "InvalidSpec"),
        ({}, status("Failed", "False", "ProviderNotFound"), "ProviderNotFound"),
        ({}, status("Failed", "False", "MappingInvalid"), "MappingInvalid"),
        ({}, status("Failed", "False", "SourceNotAllowed"), "SourceNotAllowed"),
        ({}, status("Failed", "False", "CredentialNotBound"), "CredentialNotBound"),
        ({}, status("Failed", "False", "SomethingNew"), "Other"),
        (status("Failed", "False", "ProviderNotFound"), status("Running", "True"), "admitted"),
        (status("Failed", "False", "InvalidSpec"), status("Failed", "False", "InvalidSpec"), None),
        (status("Failed", "False", "WorkspaceBusy"), status("Running", "True"), "admitted"),
        (status("Running", "True"), status("Failed", "True"), None),
    ],
)
def test_a_transition_counts_an_admission_or_a_refusal_once(
    old: dict[str, Any], new: dict[str, Any], counted: str | None
) -> None:
    assert metrics.transition(old, new) == counted


MAKERS = ("Refusal", "_unreadable")
"""What makes a refusal in the operator's code, its reason the first argument."""


def _refusal_reasons() -> set[str]:
    """The reason of every refusal the operator's code makes, read from its source: literals
    (a name is a maker's parameter, a call re-reads a reason already given; a reason composed
    in an f-string would hide from this list, so none may be)."""
    root = pathlib.Path(metrics.__file__).parent
    found: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") in MAKERS):
                continue
            assert node.args, f"{path}:{node.lineno}: a refusal without a positional reason"
            reason = node.args[0]
            if isinstance(reason, ast.Constant):
                found.add(str(reason.value))
            elif isinstance(reason, ast.JoinedStr):
                raise AssertionError(f"{path}:{node.lineno}: a reason composed in an f-string")
    return found


def test_every_reason_the_operator_refuses_for_has_its_own_label() -> None:
    made = _refusal_reasons()
    assert {"ProviderNotFound", "MappingUnreadable", "SourceNotAllowed"} <= made
    assert made - set(metrics.REFUSALS) == set()
    seen = metrics.OperatorMetrics()
    for reason in sorted(made):
        seen.status_changed({}, status("Failed", "False", reason))
    got = samples(seen)
    for reason in metrics.REFUSALS:
        expected = 1 if reason in made else 0
        assert got["ferryman_operator_refusals_total", frozenset({("reason", reason)})] == expected
    assert got["ferryman_operator_refusals_total", frozenset({("reason", "Other")})] == 0


def test_errors_are_classed_database_api_or_unexpected() -> None:
    assert metrics.error_kind(DatabaseUnavailable("down")) == "database"
    assert metrics.error_kind("connection refused") == "database"
    assert metrics.error_kind(ApiException(status=500)) == "api"
    assert metrics.error_kind(KeyError("x")) == "unexpected"


def test_counters_follow_the_hooks() -> None:
    seen = metrics.OperatorMetrics()
    seen.status_changed({}, status("Running", "True"))
    seen.status_changed(status("Running", "True"), status("Running", "True"))
    seen.status_changed({}, status("Failed", "False", "WorkspaceBusy"))
    seen.reconcile_error("refresh", "database gone")
    with pytest.raises(KeyError), seen.handling("updated"):
        raise KeyError("boom")
    got = samples(seen)
    assert got["ferryman_operator_admissions_total", frozenset()] == 1
    busy = frozenset({("reason", "WorkspaceBusy")})
    assert got["ferryman_operator_refusals_total", busy] == 1
    assert got["ferryman_operator_refusals_total", frozenset({("reason", "InvalidSpec")})] == 0
    errors = {
        dict(labels)["handler"]: (dict(labels)["error"], value)
        for (name, labels), value in got.items()
        if name == "ferryman_operator_reconcile_errors_total"
    }
    assert errors == {"refresh": ("database", 1), "updated": ("unexpected", 1)}


def test_runs_by_state_and_queued_ages_come_from_the_index_and_go_with_its_runs() -> None:
    now = datetime.datetime.now(datetime.UTC)

    def created(seconds_ago: int) -> str:
        return (now - datetime.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")

    index: dict[str, list[Candidate]] = {
        "acme": [
            Candidate(created(300), "a/live", "acme", "Running"),
            Candidate(created(120), "a/second", "acme", "Queued"),
            Candidate(created(60), "b/third", "acme", "Queued"),
        ],
        "other": [Candidate(created(5), "b/new", "other", None)],
    }
    seen = metrics.OperatorMetrics()
    seen.runs.follow(index)
    got = samples(seen)

    def runs(namespace: str, state: str) -> float:
        key = frozenset({("namespace", namespace), ("state", state)})
        return got["ferryman_operator_runs", key]

    assert (runs("a", "Running"), runs("a", "Queued"), runs("a", "Failed")) == (1, 1, 0)
    assert (runs("b", "Queued"), runs("b", "Pending")) == (1, 1)
    ages = {
        dict(labels)["workspace"]: value
        for (name, labels), value in got.items()
        if name == "ferryman_operator_queued_oldest_seconds"
    }
    assert list(ages) == ["acme"] and 119 <= ages["acme"] < 180

    index["acme"] = [Candidate(created(300), "a/live", "acme", "Succeeded")]
    del index["other"]
    got = samples(seen)
    assert not [k for k in got if k[0] == "ferryman_operator_queued_oldest_seconds"]
    assert {dict(k[1])["namespace"] for k in got if k[0] == "ferryman_operator_runs"} == {"a"}

    seen.leading(False)  # a standby counts no runs
    assert not [k for k in samples(seen) if k[0] == "ferryman_operator_runs"]


def test_sizing_gauges_show_the_last_verdict_and_drop_lanes_and_pools_that_went() -> None:
    budget = ConnectionBudget(max_connections=100, superuser_reserved=3, reserved=0)
    seen = metrics.OperatorMetrics()
    spec = pool.parse({"lanes": "migrations:4,default:2", "replicas": "3"})
    seen.sizing.set("ns", "ferryman", pool.size(spec, budget))
    got = samples(seen)
    labels = frozenset({("namespace", "ns"), ("pool", "ferryman")})
    assert got["ferryman_operator_sizing_replicas", labels] == 3
    assert got["ferryman_operator_sizing_pool_size", labels] == 10
    assert got["ferryman_operator_sizing_fits", labels] == 1
    lanes = {
        dict(k[1])["lane"]: v
        for k, v in got.items()
        if k[0] == "ferryman_operator_sizing_lane_threads"
    }
    assert lanes == {"migrations": 4, "default": 2}

    narrower = pool.parse({"lanes": "migrations:2", "replicas": "40"})
    seen.sizing.set("ns", "ferryman", pool.size(narrower, budget))  # over the budget
    got = samples(seen)
    assert got["ferryman_operator_sizing_fits", labels] == 0
    assert got["ferryman_operator_sizing_replicas", labels] == 40
    lanes = {
        dict(k[1])["lane"]: v
        for k, v in got.items()
        if k[0] == "ferryman_operator_sizing_lane_threads"
    }
    assert lanes == {"migrations": 2}

    seen.sizing.forget("ns", "ferryman")
    assert not [k for k in samples(seen) if k[0].startswith("ferryman_operator_sizing_")]


def test_the_port_comes_from_the_flag_or_the_variable_and_help_names_both(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FERRYMAN_OPERATOR_METRICS_PORT", "9191")
    assert settings.load().metrics_port == 9191
    assert settings.load(metrics_port=9292).metrics_port == 9292
    monkeypatch.delenv("FERRYMAN_OPERATOR_METRICS_PORT")
    assert settings.load().metrics_port == 0
    with pytest.raises(SystemExit):
        cli.main(["operator", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--metrics-port N" in text and "FERRYMAN_OPERATOR_METRICS_PORT" in text


def test_serve_answers_get_metrics_and_a_taken_port_names_the_setting() -> None:
    asyncio.run(serve_and_get())


async def serve_and_get() -> None:
    seen = metrics.OperatorMetrics()
    seen.leading(True)
    port = free_port()
    async with metrics.serve(port, seen), httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{port}/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain; version=")
        assert "ferryman_operator_leader 1.0" in response.text
        with pytest.raises(SettingsError, match="FERRYMAN_OPERATOR_METRICS_PORT"):
            async with metrics.serve(port, seen):
                pass
