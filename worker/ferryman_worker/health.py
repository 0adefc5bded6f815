"""The worker's HTTP endpoint on ``FERRYMAN_METRICS_PORT``: ``GET /livez``, ``GET /readyz`` and
``GET /metrics``.

Kubernetes probes it (the chart sets port 8000). ``/livez`` answers 200 while the worker's
heartbeat is fresh (within 3 x ``FERRYMAN_HEARTBEAT_INTERVAL``), so a process whose heartbeat
thread is stuck or dead is restarted; ``/readyz`` answers 200 once the lanes run and the notifier
LISTENs, and 503 again while it reconnects or shuts down. ``/metrics`` is Prometheus's text
format of ``metrics.REGISTRY``. Anything else is 404.

This module serves answers; it decides nothing: the worker says whether it is live and ready
(``Probe``). A probe never reads the database, so it costs no connection (a scrape reads the
queue depths at most every few seconds: see ``metrics``). The answers name the reason in plain
text and carry no secret (no URL, no query).
"""

from __future__ import annotations

import http.server
import logging
import threading
from typing import Protocol

from ferryman_worker import metrics
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
        log.info("HTTP endpoint on port %d: /livez, /readyz, /metrics", self.port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _handler(probe: Probe) -> type[http.server.BaseHTTPRequestHandler]:
    checks = {"/livez": probe.liveness, "/readyz": probe.readiness}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, *metrics.exposition())
                return
            check = checks.get(path)
            if check is None:
                self._answer(404, b"not found: GET /livez, /readyz or /metrics\n")
                return
            ok, why = check()
            self._answer(200 if ok else 503, (why + "\n").encode())

        def _answer(
            self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8"
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # a probe every few seconds is not news

    return Handler
