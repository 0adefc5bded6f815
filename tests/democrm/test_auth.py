"""Bearer-token authentication and the errors outside pagination."""

import httpx
import pytest
from tests.democrm.conftest import StartDemoCRM
from tests.democrm.server_fixture import DemoCRM


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer x"},
    ],
)
def test_a_listing_without_a_valid_key_is_a_401(
    shared_democrm: DemoCRM, headers: dict[str, str]
) -> None:
    response = httpx.get(f"{shared_democrm.url}/v1/organizations", headers=headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == "unauthorized"


def test_bodies_and_message_listings_need_a_key_too(shared_democrm: DemoCRM) -> None:
    assert httpx.get(f"{shared_democrm.url}/v1/deals/1/messages").status_code == 401
    assert httpx.get(f"{shared_democrm.url}/v1/messages/1").status_code == 401


def test_without_configured_keys_any_bearer_token_is_accepted(
    start_democrm: StartDemoCRM,
) -> None:
    crm = start_democrm(organizations=3, api_key=None)
    headers = {"Authorization": "Bearer anything"}
    assert httpx.get(f"{crm.url}/v1/organizations", headers=headers).status_code == 200


def test_unknown_paths_and_methods(shared_democrm: DemoCRM) -> None:
    with shared_democrm.client() as http:
        assert http.get("/v1/widgets").status_code == 404
        assert http.get("/nothing").status_code == 404
        assert http.post("/v1/organizations").status_code == 405
        assert http.put("/_truth").status_code == 405
        assert http.get("/healthz").json() == {"status": "ok"}


BASIC = {"auth": "basic", "user": "ada", "password": "pa55:word"}


def test_basic_mode_takes_the_user_and_password_and_nothing_else(
    start_democrm: StartDemoCRM,
) -> None:
    crm = start_democrm(organizations=3, budget_capacity=100, **BASIC)
    with crm.client() as http:
        assert http.get("/v1/organizations").status_code == 200
        assert http.post("/v1/people/search", json={}).status_code == 200
    for credential in [("ada", "wrong"), ("bob", "pa55:word"), ("ada", "pa55")]:
        refused = httpx.get(f"{crm.url}/v1/organizations", auth=credential)
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"].startswith("Basic realm=")
        assert "HTTP basic" in refused.json()["error"]["message"]
    bearer = {"Authorization": "Bearer pa55:word"}
    assert httpx.get(f"{crm.url}/v1/organizations", headers=bearer).status_code == 401
    assert httpx.get(f"{crm.url}/v1/organizations").status_code == 401
    assert set(crm.stats()["budgets"]) == {"ada"}  # charged to the user


def test_query_mode_takes_the_key_from_the_api_key_parameter_only(
    start_democrm: StartDemoCRM,
) -> None:
    crm = start_democrm(organizations=3, auth="query", api_key="k-123")
    with crm.client() as http:
        assert http.get("/v1/organizations", params={"paging": "all"}).status_code == 200
        assert http.post("/v1/deals/search", json={}).status_code == 200
    url = f"{crm.url}/v1/organizations"
    for refused in [
        httpx.get(url, params={"api_key": "k-999"}),
        httpx.get(url, params={"api_key": ""}),
        httpx.get(url, params={"apikey": "k-123"}),
        httpx.get(url, headers={"Authorization": "Bearer k-123"}),
        httpx.get(url),
    ]:
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"].startswith("ApiKey")
        assert refused.json()["error"]["message"] == (
            "send a valid API key as the query parameter api_key (?api_key=<key>)"
        )


def test_query_mode_without_configured_keys_accepts_any_key(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=3, auth="query", api_key=None)
    assert httpx.get(f"{crm.url}/v1/people", params={"api_key": "any"}).status_code == 200
    assert httpx.get(f"{crm.url}/v1/people").status_code == 401
