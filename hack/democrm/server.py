"""The HTTP layer: a threading server on loopback, one daemon thread per connection.

HTTP/1.1 keep-alive with ``Content-Length`` on every response, and TCP_NODELAY so a response's
headers and body (two writes) are not held back by Nagle's algorithm. Stops cleanly on SIGTERM
or SIGINT.
"""

import json
import logging
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from democrm.app import App
from democrm.wire import ApiError, Request

log = logging.getLogger("democrm")

MAX_BODY_BYTES = 1_048_576
POLL_INTERVAL = 0.05
"""How often serve_forever checks for shutdown, in seconds (the default 0.5 s slows tests)."""


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], app: App, verbose: bool = False) -> None:
        self.app = app
        self.verbose = verbose
        super().__init__(address, Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (a timed-out stall, a killed worker) are normal here."""
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "democrm/1"
    server: Server

    def do_GET(self) -> None:
        self._respond()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _respond(self) -> None:
        try:
            response = self.server.app.handle(self._request())
        except ApiError as exc:
            response = exc.response()
            self.close_connection = True
        self.send_response(response.status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(response.body)

    def _request(self) -> Request:
        url = urlsplit(self.path)
        return Request(
            method=self.command,
            path=url.path,
            query=url.query,
            authorization=self.headers.get("Authorization"),
            body=self._body(),
        )

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding"):
            raise ApiError(411, "length_required", "send request bodies with Content-Length")
        text = self.headers.get("Content-Length") or "0"
        if not text.isdigit() or int(text) > MAX_BODY_BYTES:
            raise ApiError(400, "bad_request", "Content-Length missing, invalid or too large")
        return self.rfile.read(int(text)) if int(text) else b""


def serve(app: App, host: str, port: int, verbose: bool = False) -> int:
    """Serve until SIGTERM/SIGINT; print ``{"url": ...}`` as the only stdout line once bound."""
    server = Server((host, port), app, verbose)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    thread = threading.Thread(
        target=server.serve_forever, args=(POLL_INTERVAL,), name="democrm-serve", daemon=True
    )
    thread.start()
    sys.stdout.write(json.dumps({"url": server.url}) + "\n")
    sys.stdout.flush()
    log.info("serving %s", server.url)
    while not stop.wait(1.0):
        pass
    server.shutdown()
    server.server_close()
    log.info("stopped")
    return 0
