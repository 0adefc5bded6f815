"""A TLS proxy in front of the API server that can go silent: a blackhole, not a refusal.

A client given ``kubeconfig`` talks to the proxy, which decrypts, notes each request (time,
method, path) as it forwards it, and re-encrypts to the real server. ``dark()`` stops every
byte in both directions: connections stay open, new ones are accepted but never answered, and
nothing is refused or reset, as on a network that went silent. ``light()`` ends it: the
connections of the dark time are dropped unforwarded (what was sent into the silence is lost),
new ones are forwarded again.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import datetime
import json
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tls import loopback_certificate

WRITES = ("POST", "PUT", "PATCH", "DELETE")


@dataclasses.dataclass(frozen=True)
class Request:
    at: float
    """When it was forwarded (time.time())."""
    method: str
    path: str

    @property
    def write(self) -> bool:
        return self.method in WRITES


class Blackhole:
    """Run with ``start()``/``stop()`` (or ``running``); ``requests`` is what it forwarded."""

    def __init__(self, kubeconfig: Path) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="blackhole-"))
        self._upstream_config = json.loads(kubeconfig.read_text())
        cluster = self._upstream_config["clusters"][0]["cluster"]
        server = urlsplit(cluster["server"])
        self._host, self._port = server.hostname or "127.0.0.1", server.port or 443
        ca = self._folder / "upstream-ca.crt"
        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        self._upstream = ssl.create_default_context(cafile=str(ca))
        made = loopback_certificate(self._folder)
        cert, key = made.cert_file, made.key_file
        self._cert = cert
        self._server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._server.load_cert_chain(cert, key)
        self.requests: list[Request] = []
        self._epoch = 0  # a connection forwards only while dark is off and its epoch is current
        self._dark = False
        self._held: list[tuple[int, asyncio.StreamWriter]] = []
        self._listener: asyncio.Server
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.port = 0

    # -- control (from the test's thread) ---------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self._listener = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._accept, "127.0.0.1", 0), self._loop
        ).result(10)
        self.port = int(self._listener.sockets[0].getsockname()[1])

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _shutdown(self) -> None:
        self._listener.close()
        for _, writer in self._held:
            writer.transport.abort()
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._listener.wait_closed()

    def dark(self) -> float:
        """Go silent; returns when (time.time())."""
        return asyncio.run_coroutine_threadsafe(self._go_dark(), self._loop).result(10)

    def light(self) -> float:
        """Forward again (the dark time's connections are dropped); returns when."""
        return asyncio.run_coroutine_threadsafe(self._go_light(), self._loop).result(10)

    def kubeconfig(self, path: Path) -> Path:
        """The upstream kubeconfig's user, pointed at the proxy."""
        config = json.loads(json.dumps(self._upstream_config))
        config["clusters"][0]["cluster"] = {
            "server": f"https://127.0.0.1:{self.port}",
            "certificate-authority-data": base64.b64encode(self._cert.read_bytes()).decode(),
        }
        path.write_text(json.dumps(config))
        return path

    # -- the proxy (on its own loop) --------------------------------------------------------

    async def _go_dark(self) -> float:
        self._dark = True
        self._epoch += 1
        return time.time()

    async def _go_light(self) -> float:
        self._dark = False
        for _, writer in self._held:
            writer.transport.abort()
        self._held.clear()
        return time.time()

    def _open(self, epoch: int) -> bool:
        return not self._dark and epoch == self._epoch

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        epoch = self._epoch
        self._held.append((epoch, writer))
        if self._dark:
            return  # accepted, never answered: the handshake waits until the client gives up
        try:
            await writer.start_tls(self._server)
            up_reader, up_writer = await asyncio.open_connection(
                self._host, self._port, ssl=self._upstream, server_hostname=self._host
            )
        except (OSError, ssl.SSLError):
            writer.transport.abort()
            return
        self._held.append((epoch, up_writer))
        await asyncio.gather(
            self._requests(reader, up_writer, epoch),
            self._pipe(up_reader, writer, epoch),
            return_exceptions=True,
        )
        for end in (writer, up_writer):
            end.transport.abort()

    async def _requests(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, epoch: int
    ) -> None:
        """Client to server, a request at a time: headers, then a body of Content-Length or
        chunks; each noted as it is forwarded."""
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            headers = _headers(head)
            body = await _body(reader, headers)
            if not self._open(epoch):
                await _forever()  # silent: dropped; light() aborts this connection
            writer.write(head + body)
            await writer.drain()
            method, path = head.split(b"\r\n", 1)[0].decode().split(" ")[:2]
            self.requests.append(Request(time.time(), method, path))

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, epoch: int
    ) -> None:
        while data := await reader.read(65536):
            if not self._open(epoch):
                await _forever()
            writer.write(data)
            await writer.drain()


def _headers(head: bytes) -> dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines if ":" in line)
    }


async def _body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() != "chunked":
        return b""
    body = b""
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        body += size_line + await reader.readexactly(size + 2)
        if size == 0:
            return body


async def _forever() -> None:
    await asyncio.Event().wait()


@contextlib.contextmanager
def running(kubeconfig: Path) -> Iterator[Blackhole]:
    proxy = Blackhole(kubeconfig)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


def writes_after(requests: list[Request], moment: float) -> list[Request]:
    return [r for r in requests if r.write and r.at > moment]


def lease_gets_after(requests: list[Request], moment: float, lease: str) -> int:
    return sum(1 for r in requests if r.method == "GET" and lease in r.path and r.at > moment)


def json_log_times(output: str, text: str) -> list[float]:
    """The times (time.time()) of the JSON log lines whose message contains ``text``."""
    found: list[float] = []
    for line in output.splitlines():
        with contextlib.suppress(ValueError):
            entry: dict[str, Any] = json.loads(line)
            if text in str(entry.get("message", "")):
                stamp = str(entry["time"]).replace("Z", "+00:00")
                found.append(datetime.datetime.fromisoformat(stamp).timestamp())
    return found
