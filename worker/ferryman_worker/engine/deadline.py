"""A call's time in all, enforced on every read and write of its connection.

httpx times each read on its own: a server that sends its status line and headers a byte at a
time, each byte within the read timeout, holds a call for as long as it likes. Here the network
streams of the source client's connections clip every operation's timeout to what is left of
the current call's deadline (``within``), and fail it once none is left: headers, body and TLS
handshake alike. The deadline is the calling thread's (a context variable), so a keep-alive
connection serves each call under that call's own deadline.

It sits below httpx, at httpcore's network backend (httpx's own dependency), the one place every
byte of a call passes; httpx maps httpcore's timeouts to its own, which the source client
turns into ``SourceTimeout``.
"""

from __future__ import annotations

import contextlib
import contextvars
import ssl
import time
from collections.abc import Iterable, Iterator

import httpcore
import httpx

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "ferryman_call_deadline", default=None
)


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Every network operation of this thread's calls in the block ends ``seconds`` from now."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def transport(limits: httpx.Limits) -> httpx.HTTPTransport:
    """httpx's transport (certificates as httpx finds them), its connections on deadline-bound
    streams."""
    made = httpx.HTTPTransport(limits=limits)
    made._pool = httpcore.ConnectionPool(  # the transport takes no network backend of its own
        ssl_context=httpx.create_ssl_context(),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=_Backend(),
    )
    return made


def _left(timeout: float | None, late: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` clipped to what is left of the call's deadline; ``late`` once nothing is."""
    deadline = _deadline.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise late("the call's time in all is spent")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        clipped = _left(timeout, httpcore.ConnectTimeout)
        return _Stream(self._stream.start_tls(ssl_context, server_hostname, clipped))

    def get_extra_info(self, info: str) -> object:
        return self._stream.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        clipped = _left(timeout, httpcore.ConnectTimeout)
        return _Stream(
            self._backend.connect_tcp(host, port, clipped, local_address, socket_options)
        )

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        clipped = _left(timeout, httpcore.ConnectTimeout)
        return _Stream(self._backend.connect_unix_socket(path, clipped, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)
