"""A real HTTP listener that records every request it receives (request line and headers) and
answers from a table: the source, or the intruder's host, of the credential tests.

Every answer closes its connection, so shutting the listener down waits for no keep-alive
connection a client still holds open."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator

Answer = tuple[int, dict[str, str], bytes]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        self.server.received.append(f"{self.requestline}\n{self.headers}")
        path = self.path.split("?")[0]
        status, headers, body = self.server.answers.get(
            path,
            self.server.answers.get(
                "*",
                (
                    404,
                    {},
                    b"{}",
                ),
            ),
        )
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True  # every handler ends with its one answer: closing waits for them

    def __init__(self, answers: dict[str, Answer]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers = answers
        self.received: list[str] = []

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def port(self) -> int:
        return int(self.server_address[1])


Listener = _Server


@contextlib.contextmanager
def listening(answers: dict[str, Answer] | None = None) -> Iterator[Listener]:
    """A listener on loopback answering ``answers`` (path -> status, headers, body; ``*``
    for any other path), stopped and closed at exit."""
    server = _Server(answers or {})
    serving = threading.Thread(target=server.serve_forever, name="listener")
    serving.start()
    try:
        yield server
    finally:
        server.shutdown()
        serving.join()
        server.server_close()
