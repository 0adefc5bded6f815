"""OAuth2 against the demo CRM's OAuth mode (single-use refresh tokens that rotate; a reused one
revokes its family), with the token row in real PostgreSQL: one refresher per credential for the
whole fleet, the rotated token committed before use, access tokens reused until near expiry."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from oauth_client import SUPPORT_SCRIPT, StaticCredential, refresh_auth
from tests.democrm.conftest import SMALL
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker.db import connect
from ferryman_worker.engine import oauth
from ferryman_worker.errors import ConfigurationError

CLIENT = {"client_id": "ferryman", "client_secret": "client-s3cret"}
FIRST = "rt-the-first-one"


@contextlib.contextmanager
def oauth_crm(**options: Any) -> Iterator[DemoCRM]:
    with DemoCRM.start(
        api_key=None,
        oauth_client_id=CLIENT["client_id"],
        oauth_client_secret=CLIENT["client_secret"],
        oauth_refresh_token=FIRST,
        **SMALL,
        **options,
    ) as crm:
        yield crm


def _oauth(crm: DemoCRM) -> dict[str, Any]:
    return dict(httpx.get(f"{crm.url}/_oauth").json())


def _row(db_url: str) -> dict[str, Any]:
    with connect.connect(db_url) as conn:
        row = conn.execute("SELECT * FROM ferryman_oauth_tokens").fetchone()
    assert row is not None
    return dict(row)


class Worker:
    """A real process calling the source through RefreshTokenAuth, one call per ``call()``."""

    def __init__(self, crm: DemoCRM, db_url: str) -> None:
        env = {
            **os.environ,
            "FERRYMAN_DATABASE_URL": db_url,
            "CRM_URL": crm.url,
            "CLIENT_ID": CLIENT["client_id"],
            "CLIENT_SECRET": CLIENT["client_secret"],
            "REFRESH_TOKEN": FIRST,
        }
        self.proc = subprocess.Popen(
            [sys.executable, str(SUPPORT_SCRIPT)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("call\n")
        self.proc.stdin.flush()

    def answer(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def stop(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()  # its loop ends: it exits
        if self.proc.wait(30) != 0:
            raise AssertionError(f"the worker process exited with {self.proc.returncode}")
        self.proc.stdout.close()


def _both_call(workers: list[Worker]) -> list[str]:
    for worker in workers:
        worker.ask()  # both at once: neither waits for the other's answer first
    return [worker.answer() for worker in workers]


def test_two_worker_processes_needing_a_refresh_at_once_make_one_and_share_its_token(
    db_url: str,
) -> None:
    # the token endpoint answers slowly, so the second process asks while the first refreshes
    with oauth_crm(oauth_token_latency_ms=800) as crm:
        workers = [Worker(crm, db_url), Worker(crm, db_url)]
        try:
            assert _both_call(workers) == ["200", "200"]  # no token yet: both need one
            httpx.post(f"{crm.url}/_oauth/expire")
            assert _both_call(workers) == ["200", "200"]  # both meet a 401 and refresh
        finally:
            for worker in workers:
                worker.stop()
        stats = _oauth(crm)
    assert stats["refresh_token"] == 2 and stats["reused"] == 0 and stats["refused"] == 0, stats
    # each access token was used by both processes (the expired one twice more, refused)
    assert stats["calls"] == {"1": 2, "2": 2}, stats
    assert _row(db_url)["rotations"] == 2


def test_an_access_token_is_reused_until_near_expiry_by_every_process(db_url: str) -> None:
    values = {**CLIENT, "refresh_token": FIRST}
    with oauth_crm() as crm:
        for _ in range(2):  # two processes in turn: the second finds the first's token
            with httpx.Client(base_url=crm.url, auth=refresh_auth(crm.url, db_url, values)) as http:
                assert {http.get("/v1/people").status_code for _ in range(3)} == {200}
        assert _oauth(crm)["refresh_token"] == 1
        row = _row(db_url)
    assert row["refresh_token"] not in (FIRST, None) and row["rotations"] == 1


def test_a_token_near_expiry_is_refreshed_before_use(db_url: str) -> None:
    values = {**CLIENT, "refresh_token": FIRST}
    with oauth_crm(oauth_access_ttl=30) as crm:  # lives less than the 60 s margin
        auth = refresh_auth(crm.url, db_url, values)
        with httpx.Client(base_url=crm.url, auth=auth) as http:
            assert [http.get("/v1/people").status_code for _ in range(2)] == [200, 200]
        assert _oauth(crm)["refresh_token"] == 2


def test_a_refused_refresh_names_the_fix_and_no_token(db_url: str) -> None:
    values = {**CLIENT, "refresh_token": FIRST}
    with oauth_crm() as crm:
        spent = httpx.post(  # someone else spent the Secret's refresh token
            f"{crm.url}/oauth/token",
            data={"grant_type": "refresh_token", "refresh_token": FIRST},
            auth=(CLIENT["client_id"], CLIENT["client_secret"]),
        ).json()
        with (
            httpx.Client(base_url=crm.url, auth=refresh_auth(crm.url, db_url, values)) as http,
            pytest.raises(oauth.TokenRefused) as refused,
        ):
            http.get("/v1/people")
    message = str(refused.value)
    assert "invalid_grant" in message and "refresh_token key" in message
    assert "democrm-oauth" in message and not refused.value.retryable
    for secret in (FIRST, spent["refresh_token"], spent["access_token"], CLIENT["client_secret"]):
        assert secret not in message


def test_a_new_refresh_token_in_the_secret_starts_a_new_chain(db_url: str) -> None:
    with oauth_crm() as crm:
        auth = refresh_auth(crm.url, db_url, {**CLIENT, "refresh_token": FIRST})
        with httpx.Client(base_url=crm.url, auth=auth) as http:
            assert http.get("/v1/people").status_code == 200
        httpx.post(f"{crm.url}/_oauth/expire")
        current = auth.sealer.open_text(_row(db_url)["refresh_token"])  # the worker's key
        issued = httpx.post(  # a user authorized again: a second family
            f"{crm.url}/oauth/token",
            data={"grant_type": "refresh_token", "refresh_token": current},
            auth=(CLIENT["client_id"], CLIENT["client_secret"]),
        ).json()
        auth = refresh_auth(crm.url, db_url, {**CLIENT, "refresh_token": issued["refresh_token"]})
        with httpx.Client(base_url=crm.url, auth=auth) as http:
            assert http.get("/v1/people").status_code == 200
        assert _oauth(crm)["reused"] == 0


def test_the_token_url_must_be_on_a_host_the_credential_is_bound_to() -> None:
    credential = StaticCredential("crm", {**CLIENT}, ("api.example.com",))
    with pytest.raises(ConfigurationError) as refused:
        oauth.TokenEndpoint(credential, "https://login.attacker.example/oauth/token")
    assert "credential's hosts" in str(refused.value) and "token URL" in str(refused.value)


def test_client_credentials_are_fetched_once_and_again_after_a_401() -> None:
    with oauth_crm() as crm:
        credential = StaticCredential("crm", CLIENT, ("127.0.0.1",))
        auth = oauth.ClientCredentialsAuth(
            oauth.TokenEndpoint(credential, f"{crm.url}/oauth/token", client_auth="post")
        )
        with httpx.Client(base_url=crm.url, auth=auth) as http:
            assert {http.get("/v1/people").status_code for _ in range(3)} == {200}
            httpx.post(f"{crm.url}/_oauth/expire")
            assert http.get("/v1/people").status_code == 200
            access = http.get("/_oauth").request.headers["Authorization"].removeprefix("Bearer ")
        stats = _oauth(crm)
    assert access in auth.secrets and CLIENT["client_secret"] in auth.secrets  # to redact
    assert access not in repr(auth) and CLIENT["client_secret"] not in repr(auth)
    assert stats["client_credentials"] == 2 and stats["calls"] == {"1": 3, "2": 1}, stats


def test_a_row_from_before_tokens_were_sealed_is_used_then_sealed(db_url: str) -> None:
    with oauth_crm() as crm:
        issued = httpx.post(  # the first refresh, as an earlier version made it
            f"{crm.url}/oauth/token",
            data={"grant_type": "refresh_token", "refresh_token": FIRST},
            auth=(CLIENT["client_id"], CLIENT["client_secret"]),
        ).json()
        auth = refresh_auth(crm.url, db_url, {**CLIENT, "refresh_token": FIRST})
        with connect.connect(db_url) as conn:
            # The row as a version before sealing left it (no event of this version writes a
            # token in clear), FIRST already spent: only its rotated token may be used now.
            conn.execute(
                "INSERT INTO ferryman_oauth_tokens (credential, seed_sha256, refresh_token,"
                " access_token, expires_at, sealed) VALUES (%s, %s, %s, NULL, NULL, false)",
                (auth.endpoint.credential.id, hashlib.sha256(FIRST.encode()).hexdigest(),
                 issued["refresh_token"]),
            )  # fmt: skip
        with httpx.Client(base_url=crm.url, auth=auth) as http:
            assert http.get("/v1/people").status_code == 200
        stats = _oauth(crm)
    row = _row(db_url)
    assert stats["reused"] == 0 and stats["refused"] == 0, stats  # FIRST was not spent again
    assert row["sealed"] and issued["refresh_token"] not in str(row)
    assert auth.sealer.open_text(row["refresh_token"]).startswith("rt-")
