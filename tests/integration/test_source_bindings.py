"""A credential's binding is a scheme, a host and a port, its requests stay below the run's base
URL, and the installation's allow-list decided at admission holds every request: real
``ferryman worker`` processes, a real PostgreSQL and real https listeners (which also take plain
http on their port, as an on-path observer of it would)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet
from democrm_styles import definition
from listener import Answer, Listener, listening
from migration import request, sealed, start_run, wait_finished
from tls import Certificate, loopback_certificate
from workers import Subprocess

from ferryman_worker.engine.credentials import Credential
from ferryman_worker.engine.runs import RunRequest

TOKEN = "s3cr3t-0123456789abcdef"
ORGANIZATION = {
    "id": 1,
    "name": "Acme",
    "domain": "acme.test",
    "created_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-01T00:00:00Z",
}
LAST_PAGE: Answer = (200, {}, b'{"data": [], "pagination": {"next": null}}')


@pytest.fixture
def certificate(tmp_path: pathlib.Path) -> Certificate:
    return loopback_certificate(tmp_path)


@pytest.fixture
def key_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "sealing-key"
    path.write_bytes(Fernet.generate_key())
    return path


def _page(next_url: str) -> Answer:
    body = {"data": [ORGANIZATION], "pagination": {"next": next_url}}
    return (200, {"Content-Type": "application/json"}, json.dumps(body).encode())


def _sealed_run(
    base_url: str, key_file: pathlib.Path, hosts: tuple[str, ...], allowed: tuple[str, ...] = ()
) -> RunRequest:
    """A run of namespace tenant-a as the operator admits it: its credential sealed, bound to
    ``hosts``, with the installation's ``allowed`` source URLs; its organizations walked by
    next links."""
    plain = request(
        base_url, kinds=["organizations"], stripes=1, provider_definition=definition("next_url")
    )
    return sealed(plain, key_file, Credential({"token": TOKEN}, hosts, allowed=allowed))


@pytest.fixture
def run_it(db_url: str, key_file: pathlib.Path, certificate: Certificate) -> Iterator[Any]:
    """Run a request with a real worker that trusts the listeners' certificate."""
    env = {
        "FERRYMAN_SEALING_KEY_FILE": str(key_file),
        "FERRYMAN_LOCAL_CREDENTIALS": "false",
        "SSL_CERT_FILE": str(certificate.cert_file),
    }
    worker = Subprocess(db_url, "migrations:1", env)
    try:
        worker.wait_ready()
        yield lambda req: wait_finished(db_url, start_run(db_url, req), timeout=60)
    finally:
        worker.stop()


def _carrying_token(listener: Listener, seen: list[str]) -> list[str]:
    return [line for line in seen if TOKEN in line]


def test_a_next_link_to_plain_http_on_the_bound_port_never_carries_the_credential(
    key_file: pathlib.Path, certificate: Certificate, run_it: Any
) -> None:
    answers: dict[str, Answer] = {"/v1/organizations/page-2": LAST_PAGE}
    with listening(answers, tls=certificate.server_context()) as source:
        answers["/v1/organizations"] = _page(
            f"http://127.0.0.1:{source.port}/v1/organizations/page-2"
        )
        final = run_it(_sealed_run(source.url, key_file, (f"127.0.0.1:{source.port}",)))
    assert _carrying_token(source, source.plain) == []  # nothing went in clear
    assert len(source.received) == 1 and TOKEN in source.received[0]  # page 1, over https
    assert final["state"] == "failed"
    assert "refused to send a request to http://127.0.0.1:" in final["error"]
    assert TOKEN not in final["error"]


@pytest.mark.parametrize(
    "link",
    [
        "/tenant-a/../tenant-b/v1/organizations",
        "/tenant-a/%2e%2e/tenant-b/v1/organizations",
        "/tenant-b/v1/organizations",
    ],
)
def test_a_next_link_out_of_the_base_path_is_refused(
    key_file: pathlib.Path, certificate: Certificate, run_it: Any, link: str
) -> None:
    answers: dict[str, Answer] = {"*": LAST_PAGE}
    with listening(answers, tls=certificate.server_context()) as source:
        answers["/tenant-a/v1/organizations"] = _page(source.url + link)
        base = f"{source.url}/tenant-a"
        final = run_it(_sealed_run(base, key_file, (f"127.0.0.1:{source.port}",)))
    assert [seen for seen in source.received if not seen.startswith("GET /tenant-a/v1/")] == []
    assert final["state"] == "failed"
    assert "leaves the run's spec.source.baseURL" in final["error"]


def test_a_run_row_pointed_at_a_host_the_allow_list_refuses_sends_nothing(
    key_file: pathlib.Path, certificate: Certificate, run_it: Any
) -> None:
    with listening({"*": _page("")}, tls=certificate.server_context()) as allowed:
        elsewhere = ("127.0.0.2", allowed.port)
        with listening(
            {"*": _page("")}, tls=certificate.server_context(), address=elsewhere
        ) as other:
            hosts = (f"127.0.0.1:{allowed.port}", f"127.0.0.2:{allowed.port}")
            # The operator admitted the run at the allowed source; its row's base URL was then
            # rewritten (as a write into ferryman_runs would): admission itself never lets a
            # base URL outside the allow-list through, so the row is made here as rewritten.
            req = _sealed_run(other.url, key_file, hosts, allowed=(allowed.url,))
            final = run_it(req)
    assert other.received == []
    assert final["state"] == "failed"
    assert "no pattern of the installation's allowedSourceURLs" in final["error"]
