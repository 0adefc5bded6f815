"""The source client against a real HTTP server on loopback: what each kind of answer becomes."""

from __future__ import annotations

import email.utils
import http.server
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from ferryman_worker.engine.source import BearerAuth, RateLimited, SourceClient, SourceError
from ferryman_worker.providers import Request

TOKEN = "s3cret-token"
ANSWERS: dict[str, tuple[int, dict[str, str], bytes]] = {
    "/json": (200, {"Content-Type": "application/json"}, b'{"data": [1, 2], "more": false}'),
    "/html": (200, {"Content-Type": "text/html"}, b"<html>maintenance</html>"),
    "/limited": (429, {"Retry-After": "7"}, b"{}"),
    "/limited-until": (429, {"Retry-After": "(an HTTP date 90 s from now)"}, b"{}"),
    "/limited-silently": (429, {}, b"{}"),
    "/broken": (503, {}, b"{}"),
    "/missing": (404, {}, b'{"error": "no such thing"}'),
    "/echo": (401, {}, f'{{"error": "bad token {TOKEN}"}}'.encode()),
}


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        assert self.headers["Authorization"] == f"Bearer {TOKEN}"
        if self.path.startswith("/slow"):  # outlive the client's timeout, then hang up
            time.sleep(0.6)
            self.close_connection = True
            return
        status, headers, body = ANSWERS.get(self.path.split("?")[0], ANSWERS["/json"])
        if "Retry-After" in headers and headers["Retry-After"].startswith("("):
            headers = {"Retry-After": email.utils.formatdate(time.time() + 90, usegmt=True)}
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
def client() -> Iterator[SourceClient]:
    server = _Server(("127.0.0.1", 0), _Handler)
    serving = threading.Thread(target=server.serve_forever)
    serving.start()
    host, port = server.server_address[:2]
    source = SourceClient(f"http://{host!s}:{port}", BearerAuth(TOKEN), timeout=0.3)
    try:
        yield source
    finally:
        source.close()
        server.shutdown()
        serving.join()
        server.server_close()


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
        ("/echo", False, "HTTP 401 Unauthorized (the source refused the credential"),
        ("/html", True, "the response is not JSON"),
        ("/slow", True, "timed out after 0.3s"),
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
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    source = SourceClient(url, BearerAuth(TOKEN), timeout=0.3)
    try:
        with pytest.raises(SourceError) as caught:
            _get(source, "/json")
    finally:
        source.close()
    assert caught.value.retryable and caught.value.status is None
    assert f"cannot connect to {url}" in str(caught.value) and TOKEN not in str(caught.value)
