"""Injected server errors, stalls and latency, and changing them at runtime with /_config."""

import time

import httpx
import pytest
from tests.democrm import walker
from tests.democrm.conftest import StartDemoCRM
from tests.democrm.server_fixture import DemoCRM


@pytest.mark.parametrize("style", walker.STYLES)
def test_error_rate_one_answers_every_call_with_a_5xx(
    start_democrm: StartDemoCRM, style: str
) -> None:
    crm = start_democrm(organizations=5, error_rate=1.0)
    with crm.client() as http:
        query = walker.first(style, 2)
        responses = [http.get("/v1/organizations", params=query) for _ in range(30)]
    assert {r.status_code for r in responses} == {500, 502, 503}
    assert {r.json()["error"]["code"] for r in responses} == {"injected_fault"}
    assert sum(crm.stats()["requests"]["GET /v1/organizations"].values()) == 30


def test_some_errors_then_a_retry_succeeds(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=5, error_rate=0.5)
    with crm.client() as http:
        statuses = [http.get("/v1/organizations").status_code for _ in range(40)]
    assert 200 in statuses and set(statuses) - {200} <= {500, 502, 503} and len(set(statuses)) > 1


def test_a_stall_outlasts_a_short_client_timeout(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=5, stall_rate=1.0, stall_seconds=1.0)
    with crm.client(timeout=0.3) as http, pytest.raises(httpx.ReadTimeout):
        http.get("/v1/organizations")
    with crm.client(timeout=5) as http:
        began = time.monotonic()
        assert http.get("/v1/organizations").status_code == 200
        assert time.monotonic() - began >= 0.95


def test_config_changes_behaviour_at_runtime(democrm: DemoCRM) -> None:
    with democrm.client() as http:
        assert http.get("/v1/deals").status_code == 200
        democrm.configure(error_rate=1.0)
        assert http.get("/v1/deals").status_code >= 500
        # Lower bounds only (a loaded machine adds time, never removes it); the body's latency is
        # the longer one, so a body served with the listing's latency would fall short of it.
        config = democrm.configure(error_rate=0, latency_ms=300, body_latency_ms=700)
        assert config["runtime"]["latency_ms"] == 300
        began = time.monotonic()
        assert http.get("/v1/deals").status_code == 200
        listing = time.monotonic() - began
        messages = democrm.truth()["messages"]
        intact = next(i for i in messages["ids"] if str(i) not in messages["malformed"])
        began = time.monotonic()
        assert http.get(f"/v1/messages/{intact}").status_code == 200
        body = time.monotonic() - began
    assert listing >= 0.3 and body >= 0.7


@pytest.mark.parametrize(
    "settings",
    [
        {"error_rate": 2},
        {"latency_ms": -1},
        {"seed": 3},
        {"listing_cost": 1.5},
        {"stall_rate": "x"},
    ],
)
def test_bad_config_is_a_400_and_changes_nothing(
    shared_democrm: DemoCRM, settings: dict[str, object]
) -> None:
    response = httpx.post(f"{shared_democrm.url}/_config", json=settings)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_config"
    assert httpx.get(f"{shared_democrm.url}/_config").json()["runtime"]["error_rate"] == 0


def test_stats_count_per_endpoint_and_status_and_reset(democrm: DemoCRM) -> None:
    with democrm.client() as http:
        http.get("/v1/people")
        http.get("/v1/people", params={"limit": 0})
        http.get("/v1/deals/1/messages")
    requests = democrm.stats()["requests"]
    assert requests["GET /v1/people"] == {"200": 1, "400": 1}
    assert requests["GET /v1/deals/{id}/messages"] == {"200": 1}
    assert democrm.reset_stats() == {"requests": {}, "total": 0, "budgets": {}}
