"""The OAuth2 mode: single-use refresh tokens that rotate, and a reused one revokes its family."""

from typing import Any

import httpx
from tests.democrm.conftest import SMALL, StartDemoCRM
from tests.democrm.server_fixture import DemoCRM

CLIENT = {"oauth_client_id": "ferryman", "oauth_client_secret": "s3cret"}


def _oauth(start_democrm: StartDemoCRM, **options: Any) -> DemoCRM:
    return start_democrm(api_key=None, oauth_refresh_token="rt-first", **CLIENT, **SMALL, **options)


def _refresh(crm: DemoCRM, refresh_token: str) -> httpx.Response:
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
    return httpx.post(f"{crm.url}/oauth/token", data=form, auth=("ferryman", "s3cret"))


def _people(crm: DemoCRM, access_token: str) -> int:
    bearer = {"Authorization": f"Bearer {access_token}"}
    return httpx.get(f"{crm.url}/v1/people", headers=bearer).status_code


def test_a_refresh_rotates_the_refresh_token_and_the_old_one_is_spent(
    start_democrm: StartDemoCRM,
) -> None:
    crm = _oauth(start_democrm)
    first = _refresh(crm, "rt-first").json()
    assert first["refresh_token"] != "rt-first" and first["expires_in"] == 3600
    assert _people(crm, first["access_token"]) == 200
    second = _refresh(crm, first["refresh_token"]).json()
    assert _people(crm, second["access_token"]) == 200
    stats = httpx.get(f"{crm.url}/_oauth").json()
    assert stats["refresh_token"] == 2 and stats["reused"] == 0
    assert stats["calls"] == {"1": 1, "2": 1}


def test_a_reused_refresh_token_is_refused_and_revokes_its_family(
    start_democrm: StartDemoCRM,
) -> None:
    crm = _oauth(start_democrm)
    first = _refresh(crm, "rt-first").json()
    reused = _refresh(crm, "rt-first")
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    assert _people(crm, first["access_token"]) == 401  # the family is revoked
    assert _refresh(crm, first["refresh_token"]).json()["error"] == "invalid_grant"
    assert httpx.get(f"{crm.url}/_oauth").json()["reused"] == 1


def test_client_credentials_and_expiry(start_democrm: StartDemoCRM) -> None:
    crm = _oauth(start_democrm)
    form = {"grant_type": "client_credentials", "client_id": "ferryman", "client_secret": "s3cret"}
    access = httpx.post(f"{crm.url}/oauth/token", data=form).json()["access_token"]
    assert _people(crm, access) == 200
    httpx.post(f"{crm.url}/_oauth/expire")
    assert _people(crm, access) == 401
    assert _people(crm, "anything") == 401  # only issued tokens, with OAuth on


def test_a_wrong_client_secret_is_refused(start_democrm: StartDemoCRM) -> None:
    crm = _oauth(start_democrm)
    form = {"grant_type": "refresh_token", "refresh_token": "rt-first"}
    refused = httpx.post(f"{crm.url}/oauth/token", data=form, auth=("ferryman", "wrong"))
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"
    assert _refresh(crm, "rt-first").status_code == 200  # the refused call spent nothing
