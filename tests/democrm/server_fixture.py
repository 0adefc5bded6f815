"""Run the demo CRM (``hack/democrm``) as a real subprocess, for tests in any folder.

    from tests.democrm.server_fixture import DemoCRM

    with DemoCRM.start(organizations=1200, latency_ms=5) as crm:
        with crm.client() as http:
            http.get("/v1/organizations", params={"limit": 500})
        crm.configure(error_rate=0.2)
        assert crm.truth()["organizations"]["count"] == 1200

Options are the server's command-line options with underscores (``budget_capacity=40`` becomes
``--budget-capacity 40``; ``True`` is a bare flag, a list repeats the option). The server is
always stopped: ``stop()`` sends SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "hack" / "democrm"
DEFAULT_API_KEY = "test-key"
DATASET_OPTIONS = (
    "seed",
    "organizations",
    "people",
    "deals",
    "messages_per_deal",
    "malformed_rate",
    "gone_deal_rate",
)


class DemoCRMError(RuntimeError):
    """The server did not start (it exited, or printed no URL in time)."""


class DemoCRM:
    """A running server: its URL, the API key it accepts, and helpers for the control endpoints."""

    def __init__(
        self, process: subprocess.Popen[str], url: str, api_key: str, options: dict[str, Any]
    ) -> None:
        self.process = process
        self.url = url
        self.api_key = api_key
        self.options = options

    @classmethod
    def start(
        cls, *, api_key: str | None = DEFAULT_API_KEY, startup_timeout: float = 20.0, **options: Any
    ) -> DemoCRM:
        """Start ``python hack/democrm serve --port 0 --api-key KEY ...`` and wait for its URL.

        With ``api_key=None`` the server accepts any API key; ``client()`` then sends
        ``DEFAULT_API_KEY``. With ``auth="basic"`` (and ``user``, ``password``) no API key is
        passed: the server takes the user and password."""
        argv = [sys.executable, str(SERVER), "serve", "--port", "0"]
        keyed = api_key is not None and options.get("auth") != "basic"
        argv += ["--api-key", api_key] if keyed and api_key is not None else []
        process = subprocess.Popen(
            [*argv, *cli_args(options)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
        )
        try:
            url = read_url(process, startup_timeout)
        except BaseException:
            process.kill()
            process.wait()
            raise
        return cls(process, url, api_key or DEFAULT_API_KEY, options)

    def stop(self, grace: float = 10.0) -> int:
        """Terminate (SIGTERM), kill if it lingers; returns the exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode

    def __enter__(self) -> DemoCRM:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def client(self, **kwargs: Any) -> httpx.Client:
        """An httpx client for the API, authenticated as the server's auth style asks: its key
        as a bearer token (default) or as the ``api_key`` parameter (``auth="query"``), or its
        user and password (``auth="basic"``)."""
        style = self.options.get("auth", "bearer")
        if style == "basic":
            kwargs.setdefault("auth", (self.options["user"], self.options["password"]))
        elif style == "query":
            kwargs["params"] = {"api_key": self.api_key, **kwargs.pop("params", {})}
        else:
            kwargs["headers"] = {"Authorization": f"Bearer {self.api_key}",
                                 **kwargs.pop("headers", {})}  # fmt: skip
        return httpx.Client(base_url=self.url, **kwargs)

    def truth(self, *, ids: bool = True) -> dict[str, Any]:
        return self._control("GET", "/_truth", params={"ids": "1" if ids else "0"})

    def configure(self, **settings: Any) -> dict[str, Any]:
        """Change runtime settings (latency, faults, budget); returns the resulting config."""
        return self._control("POST", "/_config", json=settings)

    def drift(self, **change: Any) -> dict[str, Any]:
        """Delete or create records, or expire cursors, now or after some pages of a kind
        (``POST /_drift``)."""
        return self._control("POST", "/_drift", json=change)

    def drifted(self) -> dict[str, Any]:
        """The deleted ids per kind, how many drift changes wait or were applied, the cursor
        epoch (``GET /_drift``)."""
        return self._control("GET", "/_drift")

    def stats(self) -> dict[str, Any]:
        return self._control("GET", "/_stats")

    def change(self, **parts: Any) -> dict[str, Any]:
        """Edit, add or delete records (``update={kind: [ids]}``, ``add={kind: n}``,
        ``delete={kind: [ids]}``; none: only switch changes on): ``POST /_changes``."""
        return self._control("POST", "/_changes", json=parts)

    def reset_stats(self) -> dict[str, Any]:
        return self._control("DELETE", "/_stats")

    def truth_command(self) -> dict[str, Any]:
        """The ``truth`` command's output for this server's dataset options."""
        dataset = {name: value for name, value in self.options.items() if name in DATASET_OPTIONS}
        return run_truth_command(**dataset)

    def _control(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = httpx.request(method, self.url + path, timeout=30.0, **kwargs)
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result


def run_truth_command(**dataset: Any) -> dict[str, Any]:
    argv = [sys.executable, str(SERVER), "truth", *cli_args(dataset)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def cli_args(options: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if item is True:
                args.append(flag)
            elif item is not False and item is not None:
                args += [flag, str(item)]
    return args


def read_url(process: subprocess.Popen[str], timeout: float) -> str:
    """The URL from the server's one stdout line, ``{"url": "http://127.0.0.1:PORT"}``."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not selector.select(max(0.0, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                raise DemoCRMError(f"democrm printed no URL within {timeout} s")
    line = process.stdout.readline()
    if not line:
        raise DemoCRMError(f"democrm exited with code {process.wait()} before printing its URL")
    url: str = json.loads(line)["url"]
    return url
