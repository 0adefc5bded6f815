"""A credential reaches only the hosts it is bound to, and never shows in a run's error, against
real HTTP listeners and a real PostgreSQL: the source client's guard, redirects, and whole runs
whose credential was sealed at admission."""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Iterator

import prometheus_client
import pytest
from cryptography.fernet import Fernet
from listener import Listener, listening
from migration import engine_worker, request, sealed, start_run, wait_finished

from ferryman_worker.engine.auth import Bearer
from ferryman_worker.engine.credentials import Credential
from ferryman_worker.engine.runs import RunRequest
from ferryman_worker.engine.source import SourceClient, SourceError
from ferryman_worker.providers import Request

TOKEN = "s3cr3t-0123456789abcdef"


@pytest.fixture
def key_file(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    path = tmp_path / "sealing-key"
    path.write_bytes(Fernet.generate_key())
    yield path


def _client(url: str, credential: Credential) -> SourceClient:
    return SourceClient(
        url,
        Bearer(credential.token),
        timeout=5.0,
        guard=credential.guard,
        secrets=credential.secrets,
    )


def _leaked(listener: Listener) -> list[str]:
    """What the listener received that carries the token, or any 8 characters of it."""
    pieces = {TOKEN[i : i + 8] for i in range(len(TOKEN) - 7)}
    return [seen for seen in listener.received if any(piece in seen for piece in pieces)]


def test_the_guard_refuses_an_unbound_host_before_anything_is_sent() -> None:
    credential = Credential({"token": TOKEN}, ("api.tenant-a.example",))
    with listening({"*": (200, {}, b"{}")}) as intruder:
        client = _client(intruder.url, credential)
        try:
            with pytest.raises(SourceError) as caught:
                client.get(Request("/organizations", {"token": TOKEN}, 1))
        finally:
            client.close()
    assert intruder.received == []
    assert not caught.value.retryable
    assert "api.tenant-a.example" in str(caught.value) and TOKEN not in str(caught.value)


def test_a_redirect_is_not_followed_so_the_credential_stays_with_its_host() -> None:
    with listening({"*": (200, {}, b"{}")}) as elsewhere:
        moved = {"*": (302, {"Location": f"{elsewhere.url}/stolen"}, b"")}
        with listening(moved) as source:
            credential = Credential({"token": TOKEN}, (f"http://127.0.0.1:{source.port}",))
            client = _client(source.url, credential)
            try:
                with pytest.raises(SourceError) as caught:
                    client.get(Request("/organizations", {}, 1))
            finally:
                client.close()
        assert len(source.received) == 1 and TOKEN in source.received[0]  # it was bound there
    assert elsewhere.received == []
    assert not caught.value.retryable and "HTTP 302 Found" in str(caught.value)
    assert "follows none" in str(caught.value)


def _sealed_request(url: str, key_file: pathlib.Path, hosts: tuple[str, ...]) -> RunRequest:
    plain = request(url, kinds=["organizations"], stripes=1)
    return sealed(plain, key_file, Credential({"token": TOKEN}, hosts))


def test_a_run_whose_base_url_is_not_bound_never_sends_the_token(
    db_url: str, key_file: pathlib.Path
) -> None:
    with listening({"*": (200, {}, b'{"data": [], "more": false}')}) as intruder:
        req = _sealed_request(intruder.url, key_file, ("api.tenant-a.example",))
        with engine_worker(db_url, sealing_key_file=str(key_file)):
            final = wait_finished(db_url, start_run(db_url, req), timeout=60)
    assert intruder.received == [] and _leaked(intruder) == []
    assert final["state"] == "failed"
    assert "refused to send the source credential" in final["error"]
    assert "api.tenant-a.example" in final["error"] and TOKEN not in final["error"]


def test_a_token_across_the_200th_character_of_an_error_body_shows_nowhere(
    db_url: str, key_file: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    body = ("x" * 190 + TOKEN + " was refused").encode()  # the token straddles character 200
    caplog.set_level(logging.DEBUG)
    with listening({"*": (400, {"Content-Type": "text/plain"}, body)}) as source:
        req = _sealed_request(source.url, key_file, (f"http://127.0.0.1:{source.port}",))
        with engine_worker(db_url, sealing_key_file=str(key_file)):
            final = wait_finished(db_url, start_run(db_url, req), timeout=60)
    assert source.received and all(f"Bearer {TOKEN}" in seen for seen in source.received)
    assert final["state"] == "failed" and "HTTP 400 Bad Request" in final["error"]
    metrics = prometheus_client.generate_latest().decode()
    for shown in (final["error"], caplog.text, metrics):
        assert not any(TOKEN[: n + 4] in shown for n in range(len(TOKEN) - 4)), shown[-400:]
    assert "x" * 100 + "***" in caplog.text  # the source's words reach the log, redacted
