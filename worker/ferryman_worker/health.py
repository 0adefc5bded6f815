"""The worker's health endpoint: ``GET /livez`` and ``GET /readyz`` on ``FERRYMAN_METRICS_PORT``.

Kubernetes probes it (the chart sets port 8000). ``/livez`` answers 200 while the worker's
heartbeat is fresh (within 3 x ``FERRYMAN_HEARTBEAT_INTERVAL``), so a process whose heartbeat
thread is stuck or dead is restarted; ``/readyz`` answers 200 once the lanes run and the notifier
LISTENs, and 503 again while it reconnects or shuts down. Anything else is 404.

This module serves answers; it decides nothing: the worker says whether it is live and ready
(``Probe``). It never reads the database, so a probe costs no connection. The answers name the
reason in plain text and carry no secret (no URL, no query).
"""

from __future__ import annotations

import http.server
import logging
import threading
from typing import Protocol

from ferryman_worker.errors import ConfigurationError

log = logging.getLogger("ferryman.health")


class Probe(Protocol):
    """What the endpoint asks: each returns (ok, why) with a short reason."""

    def liveness(self) -> tuple[bool, str]: ...

    def readiness(self) -> tuple[bool, str]: ...


class HealthServer:
    """An HTTP server on its own daemon thread; ``start`` binds, ``stop`` closes."""

    def __init__(self, probe: Probe, port: int, host: str = "0.0.0.0") -> None:
        self._probe = probe
        self._address = (host, port)
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the given one, or the one picked for port 0)."""
        assert self._server is not None, "not started"
        return int(self._server.server_address[1])

    def start(self) -> None:
        try:
            self._server = http.server.ThreadingHTTPServer(self._address, _handler(self._probe))
        except OSError as exc:
            raise ConfigurationError(
                f"metrics_port (FERRYMAN_METRICS_PORT, --metrics-port): cannot listen on port "
                f"{self._address[1]} ({exc.strerror}); pick a free port, or 0 to turn it off"
            ) from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="health", daemon=True
        )
        self._thread.start()
        log.info("health endpoint on port %d: /livez, /readyz", self.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _handler(probe: Probe) -> type[http.server.BaseHTTPRequestHandler]:
    checks = {"/livez": probe.liveness, "/readyz": probe.readiness}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            check = checks.get(self.path.split("?", 1)[0])
            if check is None:
                self._answer(404, "not found: GET /livez or /readyz")
                return
            ok, why = check()
            self._answer(200 if ok else 503, why)

        def _answer(self, status: int, text: str) -> None:
            body = (text + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # a probe every few seconds is not news

    return Handler
