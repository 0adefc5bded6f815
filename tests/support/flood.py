"""A real HTTP server whose every answer is a stream that never has to end: ``total`` bytes (made
as they are sent, never held), ``chunk`` bytes at a time, ``pause`` seconds between chunks. The
source of the resource-cap tests: a 2 GB answer, one that drips for ever, or one whose headers
do. ``sent`` counts what left it; a client that hangs up ends the stream."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator

HEADER_DRIP = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nX-Drip: "
"""What a header drip sends first, a byte at a time; then its last header never ends."""


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the body ends when the connection does: no length declared
    server: Flood

    def do_GET(self) -> None:
        if self.server.header_pause is not None:
            self._drip_headers(self.server.header_pause)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        filler = b" " * self.server.chunk  # JSON whitespace: a body that never becomes a value
        left = self.server.total
        try:
            while left > 0 and not self.server.stopping.is_set():
                piece = filler[: min(left, len(filler))]
                self.wfile.write(piece)
                self.wfile.flush()
                self.server.count(len(piece))
                left -= len(piece)
                self.server.stopping.wait(self.server.pause)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up: what the cap is for

    def _drip_headers(self, pause: float) -> None:
        """The status line and headers one byte every ``pause`` seconds, never ending."""
        sent = 0
        try:
            while not self.server.stopping.is_set():
                byte = HEADER_DRIP[sent : sent + 1] or b"x"
                self.wfile.write(byte)
                self.wfile.flush()
                self.server.count(1)
                sent += 1
                self.server.stopping.wait(pause)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up: what the timeout is for

    def log_message(self, format: str, *args: object) -> None:
        pass


class Flood(http.server.ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True

    def __init__(
        self, total: int, chunk: int, pause: float, header_pause: float | None = None
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.total, self.chunk, self.pause = total, chunk, pause
        self.header_pause = header_pause
        self.sent = 0
        self.stopping = threading.Event()
        self._lock = threading.Lock()

    def count(self, n: int) -> None:
        with self._lock:
            self.sent += n

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@contextlib.contextmanager
def flooding(
    total: int, chunk: int = 1 << 20, pause: float = 0.0, header_pause: float | None = None
) -> Iterator[Flood]:
    """A flood on loopback, stopped (its streams cut) and closed at exit. With
    ``header_pause`` it sends no body: its status line and headers come a byte every
    ``header_pause`` seconds, for ever."""
    server = Flood(total, chunk, pause, header_pause)
    serving = threading.Thread(target=server.serve_forever, name="flood")
    serving.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        serving.join()
        server.server_close()
