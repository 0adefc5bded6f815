"""HTTP calls to a source API: one boundary where httpx's errors become ours.

Calls never hold a database connection or an open transaction; rate-limit tokens are reserved
by the caller (on the job thread) before a call is made. The client applies its credential
through an ``httpx.Auth``; its guard (an httpx request hook) refuses a request to a host the
credential is not bound to before it is sent, and no redirect is ever followed. An error's
message says the status code and its standard reason phrase, never the source's own words:
those go to the log only, redacted, then cut.
"""

from __future__ import annotations

import dataclasses
import http
import logging
import random
import time
from collections.abc import Callable, Generator
from typing import Any

import httpx
import pydantic_core

from ferryman_worker.engine import ratelimit
from ferryman_worker.engine.credentials import HostNotBound, redact
from ferryman_worker.errors import FerrymanError
from ferryman_worker.providers import Request

log = logging.getLogger("ferryman.engine.source")

Guard = Callable[[httpx.Request], None]
"""Refuses a request (by raising) before it is sent."""


class SourceError(FerrymanError):
    """The source failed the call; ``retryable`` says whether trying again may help, ``status``
    is the HTTP status it answered with (None: no answer, or not one of its statuses)."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status

    @property
    def gone(self) -> bool:
        """The source says the record does not exist (any more): HTTP 404 or 410."""
        return self.status in (404, 410)


class SourceTimeout(SourceError):
    """The source did not answer within the client's timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


class RateLimited(SourceError):
    """HTTP 429: wait ``retry_after`` seconds (the source said so), or back off (None: it did
    not say for how long)."""

    def __init__(self, retry_after: float | None) -> None:
        how_long = "" if retry_after is None else f" for {retry_after:.0f}s"
        super().__init__(f"the source is rate-limiting us{how_long}", retryable=True, status=429)
        self.retry_after = retry_after

    def pause(self, attempt: int) -> float:
        """Seconds to pause the credential after the ``attempt``-th 429 of a call in a row."""
        return ratelimit.backoff(attempt) if self.retry_after is None else self.retry_after


class BearerAuth(httpx.Auth):
    """``Authorization: Bearer <token>``."""

    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


@dataclasses.dataclass
class SourceClient:
    """A keep-alive HTTP client for one source and credential (thread-safe: httpx.Client).
    ``secrets`` are redacted from whatever of the source's answer is logged."""

    base_url: str
    auth: httpx.Auth
    timeout: float = 10.0
    guard: Guard | None = None
    secrets: tuple[str, ...] = ()
    client: httpx.Client = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(
            base_url=self.base_url,
            auth=self.auth,
            headers={"Accept": "application/json"},
            timeout=httpx.Timeout(self.timeout, connect=5.0),
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=32),
            follow_redirects=False,
            event_hooks={"request": [self.guard] if self.guard else []},
        )

    def get(self, request: Request) -> Any:
        """One GET, decoded; SourceError (RateLimited for 429) on failure. No retry here."""
        try:
            response = self.client.get(request.path, params=request.params)
        except HostNotBound as exc:
            raise SourceError(f"GET {request.path}: {exc}", retryable=False) from None
        except httpx.TimeoutException:
            raise SourceTimeout(f"GET {request.path} timed out after {self.timeout:g}s") from None
        except httpx.ConnectError:
            raise SourceError(
                f"GET {request.path}: cannot connect to {self.base_url} (check"
                " spec.source.baseURL, and that the source is up and reachable)",
                retryable=True,
            ) from None
        except httpx.TransportError as exc:
            raise SourceError(
                f"GET {request.path} failed: {type(exc).__name__}", retryable=True
            ) from None
        if response.status_code == 429:
            raise RateLimited(ratelimit.retry_after(response.headers))
        status = response.status_code
        if status >= 300:
            self._log_answer(request, response)
        if status >= 500:
            raise SourceError(
                f"GET {request.path}: HTTP {_said(status)}", retryable=True, status=status
            )
        if status >= 300:
            raise SourceError(
                f"GET {request.path}: HTTP {_said(status)}" + _hint(status),
                retryable=False,
                status=status,
            )
        try:
            return pydantic_core.from_json(response.content)  # faster than json.loads
        except ValueError as exc:
            raise SourceError(
                f"GET {request.path}: the response is not JSON ({exc})", retryable=True
            ) from None

    def _log_answer(self, request: Request, response: httpx.Response) -> None:
        """The source's words on a failed call, for whoever reads the worker's log: redacted,
        then cut (they never reach a run's status)."""
        log.info(
            "GET %s: HTTP %s: %s",
            request.path,
            response.status_code,
            redact(response.text, self.secrets),
        )

    def close(self) -> None:
        self.client.close()


def _said(status: int) -> str:
    """``403 Forbidden``: the code and its standard phrase (not the one the source sent)."""
    try:
        return f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _hint(status: int) -> str:
    if 300 <= status < 400:
        return (
            " (a redirect: ferryman follows none, so a credential never travels to where it"
            " points; set spec.source.baseURL to the source's own address)"
        )
    if status in (401, 403):
        return (
            " (the source refused the credential: check the token that"
            " spec.source.credentialsSecretRef names)"
        )
    return ""


@dataclasses.dataclass
class Retry:
    """Retries of a failing source call inside one task attempt: ``attempts`` tries per call,
    with ``sleep(n)`` (exponential, jittered, capped) before the next round."""

    attempts: int = 6
    base: float = 0.2
    cap: float = 10.0

    def sleep(self, attempt: int) -> None:
        time.sleep(min(self.cap, self.base * 2.0**attempt) * random.uniform(0.5, 1.0))
