"""The source client against a real HTTP server on loopback: what each kind of answer becomes."""

from __future__ import annotations

import email.utils
import http.server
import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from net import free_port

from ferryman_worker.engine import auth
from ferryman_worker.engine.auth import Bearer
from ferryman_worker.engine.credentials import Credential, url_host
from ferryman_worker.engine.runtime import EngineRuntime
from ferryman_worker.engine.source import RateLimited, SourceClient, SourceError
from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import AuthStyle, Request, ResponsePolicy

TOKEN = "s3cret-token"
ANSWERS: dict[str, tuple[int, dict[str, str], bytes]] = {
    "/json": (200, {"Content-Type": "application/json"}, b'{"data": [1, 2], "more": false}'),
    "/html": (200, {"Content-Type": "text/html"}, b"<html>maintenance</html>"),
    "/limited": (429, {"Retry-After": "7"}, b"{}"),
    "/limited-until": (429, {"Retry-After": "(an HTTP date 90 s from now)"}, b"{}"),
    "/limited-silently": (429, {}, b"{}"),
    "/broken": (503, {}, b"{}"),
    "/missing": (404, {}, b'{"error": "no such thing"}'),
    "/quota": (429, {"X-Quota-Reset": "12"}, b"{}"),
    "/echo": (401, {}, f'{{"error": "bad token {TOKEN}"}}'.encode()),
}


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path.startswith("/request"):
            self._echo()
            return
        if self.path.startswith("/moved"):
            self._answer(302, {"Location": "http://example.com/elsewhere"}, b"")
            return
        if self.path.startswith("/slow"):  # outlive the client's timeout, then hang up
            time.sleep(0.6)
            self.close_connection = True
            return
        status, headers, body = ANSWERS.get(self.path.split("?")[0], ANSWERS["/json"])
        if "Retry-After" in headers and headers["Retry-After"].startswith("("):
            headers = {"Retry-After": email.utils.formatdate(time.time() + 90, usegmt=True)}
        self._answer(status, headers, body)

    def do_POST(self) -> None:
        self._echo()

    def _echo(self) -> None:
        """What the request was: method, target, the headers that carry a credential or a
        version, and its JSON body."""
        length = int(self.headers.get("Content-Length") or 0)
        sent = self.rfile.read(length) if length else b"null"
        names = ("Authorization", "X-Api-Key", "API-Version", "Content-Type")
        seen = {name: self.headers[name] for name in names if self.headers[name]}
        echo = {"method": self.command, "target": self.path, "headers": seen}
        answer = json.dumps({**echo, "json": json.loads(sent)}).encode()
        self._answer(200, {"Content-Type": "application/json", "X-Next": "n1"}, answer)

    def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() waits for the handlers: no socket outlives the test


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), _Handler)
    serving = threading.Thread(target=server.serve_forever)
    serving.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        serving.join()
        server.server_close()


@pytest.fixture(scope="module")
def client(url: str) -> Iterator[SourceClient]:
    source = SourceClient(url, Bearer(TOKEN), timeout=0.3)
    try:
        yield source
    finally:
        source.close()


def _get(client: SourceClient, path: str) -> object:
    return client.get(Request(path, {"start": 0}, 1))


def test_a_json_answer_is_decoded(client: SourceClient) -> None:
    assert _get(client, "/json") == {"data": [1, 2], "more": False}


def test_a_429_says_how_long_to_wait(client: SourceClient) -> None:
    with pytest.raises(RateLimited) as caught:
        _get(client, "/limited")
    assert caught.value.retry_after == 7 and caught.value.retryable


def test_a_429_may_say_until_when_as_an_http_date(client: SourceClient) -> None:
    with pytest.raises(RateLimited) as caught:
        _get(client, "/limited-until")
    assert caught.value.retry_after is not None and 80 <= caught.value.retry_after <= 90
    assert caught.value.pause(1) == caught.value.retry_after


def test_a_429_that_says_nothing_backs_off_longer_each_time(client: SourceClient) -> None:
    with pytest.raises(RateLimited) as caught:
        _get(client, "/limited-silently")
    assert caught.value.retry_after is None
    assert [caught.value.pause(attempt) for attempt in (1, 2, 3)] == [1, 2, 4]


@pytest.mark.parametrize(
    ("path", "retryable", "words"),
    [
        ("/broken", True, "HTTP 503 Service Unavailable"),
        ("/missing", False, "HTTP 404 Not Found"),
        ("/echo", False, "HTTP 401 Unauthorized (the source refused the token sent as"),
        ("/html", True, "the response is not JSON"),
        ("/slow", True, "took longer than 0.3s in all"),
    ],
)
def test_failures_say_what_happened_and_whether_to_retry(
    client: SourceClient, path: str, retryable: bool, words: str
) -> None:
    with pytest.raises(SourceError) as caught:
        _get(client, path)
    assert caught.value.retryable is retryable
    assert words in str(caught.value) and path in str(caught.value)
    assert TOKEN not in str(caught.value) and "error" not in str(caught.value)  # not its words


def test_a_source_that_is_not_listening_is_named_with_its_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # a port nothing listens on
    source = SourceClient(url, Bearer(TOKEN), timeout=0.3)
    try:
        with pytest.raises(SourceError) as caught:
            _get(source, "/json")
    finally:
        source.close()
    assert caught.value.retryable and caught.value.status is None
    assert f"cannot connect to {url}" in str(caught.value) and TOKEN not in str(caught.value)


def test_a_request_carries_its_method_query_json_body_and_headers(client: SourceClient) -> None:
    request = Request(
        "/request/search",
        {"limit": 2},
        method="POST",
        headers={"API-Version": "2026-01"},
        json={"filter": {"status": "open"}},
    )
    reply = client.call(request)
    assert reply.status == 200 and reply.headers["x-next"] == "n1"  # the walk sees headers
    assert reply.body == {
        "method": "POST",
        "target": "/request/search?limit=2",
        "headers": {
            "Authorization": f"Bearer {TOKEN}",
            "API-Version": "2026-01",
            "Content-Type": "application/json",
        },
        "json": {"filter": {"status": "open"}},
    }


@pytest.mark.parametrize(
    ("style", "values", "target", "headers"),
    [
        (AuthStyle("bearer"), {"token": "t0k"}, "/request", {"Authorization": "Bearer t0k"}),
        (AuthStyle("header", "X-Api-Key"), {"token": "k3y"}, "/request", {"X-Api-Key": "k3y"}),
        (
            AuthStyle("header", "Authorization", "Token "),
            {"token": "k3y"},
            "/request",
            {"Authorization": "Token k3y"},
        ),
        (AuthStyle("query", "api_key"), {"token": "k3y"}, "/request?api_key=k3y", {}),
        (AuthStyle("none"), {}, "/request", {}),
        (
            AuthStyle("basic"),
            {"username": "ann", "password": "pw"},
            "/request",
            {"Authorization": "Basic YW5uOnB3"},
        ),
    ],
)
def test_each_auth_style_puts_the_credential_where_the_api_reads_it(
    url: str, style: AuthStyle, values: dict[str, str], target: str, headers: dict[str, str]
) -> None:
    source = SourceClient(url, auth.build(style, values), timeout=2)
    try:
        body = source.get(Request("/request"))
    finally:
        source.close()
    assert (body["target"], body["headers"]) == (target, headers)
    assert "k3y" not in repr(source.auth) and "pw" not in repr(source.auth)


def test_an_auth_style_names_the_credential_keys_it_lacks_never_their_values() -> None:
    with pytest.raises(ConfigurationError) as caught:
        auth.build(AuthStyle("basic"), {"username": "ann"})
    assert "['password']" in str(caught.value) and "ann" not in str(caught.value)


def test_a_key_sent_in_the_query_is_redacted_from_messages(url: str) -> None:
    source = SourceClient(url, auth.build(AuthStyle("query", "key"), {"token": TOKEN}))
    try:
        with pytest.raises(SourceError) as caught:
            source.get(Request(f"/echo?key={TOKEN}"))
    finally:
        source.close()
    assert "HTTP 401" in str(caught.value) and "/echo?key=***: HTTP" in str(caught.value)
    assert TOKEN not in str(caught.value)


def test_a_redirect_is_never_followed(client: SourceClient) -> None:
    with pytest.raises(SourceError) as caught:
        _get(client, "/moved")
    assert not caught.value.retryable and "HTTP 302" in str(caught.value)


def test_a_guard_refuses_a_request_before_it_is_sent(url: str) -> None:
    sent: list[str] = []

    def guard(request: httpx.Request) -> None:
        sent.append(str(request.url))
        if request.url.path != "/request":
            raise SourceError(f"{request.url.path} is not for this credential", retryable=False)

    source = SourceClient(url, Bearer(TOKEN), guard=guard)
    try:
        assert source.get(Request("/request"))["method"] == "GET"
        with pytest.raises(SourceError, match=r"/private is not for this credential"):
            source.get(Request("/private"))
    finally:
        source.close()
    assert sent == [f"{url}/request", f"{url}/private"]


@pytest.mark.parametrize(
    "link", ["http://example.com/request", "https://127.0.0.1/request", "/a/%2E%2E/request"]
)
def test_a_request_leaving_the_base_url_is_refused_before_it_is_sent(url: str, link: str) -> None:
    source = SourceClient(url, Bearer(TOKEN))
    try:
        with pytest.raises(SourceError, match=r"leaves the run's spec\.source\.baseURL") as caught:
            source.get(Request(link))
    finally:
        source.close()
    assert not caught.value.retryable


def test_the_kind_s_policy_says_what_a_status_means(client: SourceClient) -> None:
    policy = ResponsePolicy(
        gone=frozenset(), rate_limited=frozenset({429, 503}), reset="X-Quota-Reset", backoff=4
    )
    with pytest.raises(RateLimited) as limited:
        client.call(Request("/broken"), policy)
    assert limited.value.retry_after is None and limited.value.status == 503
    assert [limited.value.pause(n) for n in (1, 2, 3)] == [4, 8, 16]  # says nothing: backoff
    with pytest.raises(RateLimited) as own:
        client.call(Request("/quota"), policy)
    assert own.value.retry_after == 12  # the source's own reset header, as the policy names it
    with pytest.raises(RateLimited) as unnamed:
        client.call(Request("/quota"))
    assert unnamed.value.retry_after is None
    with pytest.raises(SourceError) as missing:
        client.call(Request("/missing"), policy)
    assert not missing.value.gone and not missing.value.retryable
    with pytest.raises(SourceError) as gone:
        client.call(Request("/missing"))
    assert gone.value.gone


def test_a_worker_keeps_a_client_per_auth_style_on_one_base_url_and_credential(url: str) -> None:
    """Two providers of one API, one credential: each request carries its own provider's style."""
    runtime = EngineRuntime()
    credential = Credential({"token": "k3y"}, (url_host(url),))
    styles = [AuthStyle("bearer"), AuthStyle("header", "X-Api-Key"), AuthStyle("query", "k")]
    try:
        clients = [runtime.client(url, credential, style) for style in styles]
        seen = [client.get(Request("/request")) for client in clients]
        again = runtime.client(url, credential, AuthStyle("header", "X-Api-Key"))
    finally:
        runtime.close()
    assert [(body["target"], body["headers"]) for body in seen] == [
        ("/request", {"Authorization": "Bearer k3y"}),
        ("/request", {"X-Api-Key": "k3y"}),
        ("/request?k=k3y", {}),
    ]
    assert again is clients[1]  # the same provider's calls share one keep-alive client
