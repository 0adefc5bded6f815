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
