"""A real HTTP listener that records every request it receives (request line and headers) and
answers from a table: the source, or the intruder's host, of the credential tests. With a TLS
context it speaks https and plain http on one port, as an on-path observer of that port sees
both: ``plain`` holds what reached it in clear.

Every answer closes its connection, so shutting the listener down waits for no keep-alive
connection a client still holds open."""

from __future__ import annotations

import contextlib
import http.server
import socket
import ssl
import threading
from collections.abc import Iterator

Answer = tuple[int, dict[str, str], bytes]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        seen = f"{self.requestline}\n{self.headers}"
        self.server.received.append(seen)
        if not isinstance(self.connection, ssl.SSLSocket):
            self.server.plain.append(seen)
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

    def __init__(
        self, answers: dict[str, Answer], tls: ssl.SSLContext | None, address: tuple[str, int]
    ) -> None:
        super().__init__(address, _Handler)
        self.answers = answers
        self.tls = tls
        self.received: list[str] = []
        self.plain: list[str] = []
        """Requests that arrived without TLS."""

    def get_request(self) -> tuple[socket.socket, object]:
        """A connection, in TLS if its first byte opens a TLS handshake (and there is a context)."""
        sock, address = super().get_request()
        if self.tls is not None and sock.recv(1, socket.MSG_PEEK) == b"\x16":
            return self.tls.wrap_socket(sock, server_side=True), address
        return sock, address

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host!s}:{port}"

    @property
    def port(self) -> int:
        return int(self.server_address[1])


Listener = _Server


@contextlib.contextmanager
def listening(
    answers: dict[str, Answer] | None = None,
    tls: ssl.SSLContext | None = None,
    address: tuple[str, int] = ("127.0.0.1", 0),
) -> Iterator[Listener]:
    """A listener on ``address`` (loopback, a free port) answering ``answers`` (path ->
    status, headers, body; ``*`` for any other path), with ``tls`` also https; stopped and
    closed at exit."""
    server = _Server(answers or {}, tls, address)
    serving = threading.Thread(target=server.serve_forever, name="listener")
    serving.start()
    try:
        yield server
    finally:
        server.shutdown()
        serving.join()
        server.server_close()
