"""HTTP calls to a source API: one boundary where httpx's errors become ours.

Calls never hold a database connection or an open transaction; rate-limit tokens are reserved
by the caller (on the job thread) before a call is made.
"""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Any

import httpx
import pydantic_core

from ferryman_worker.engine import ratelimit
from ferryman_worker.errors import FerrymanError
from ferryman_worker.providers import Request


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


@dataclasses.dataclass
class SourceClient:
    """A keep-alive HTTP client for one source and credential (thread-safe: httpx.Client)."""

    base_url: str
    token: str
    timeout: float = 10.0
    client: httpx.Client = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json"},
            timeout=httpx.Timeout(self.timeout, connect=5.0),
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=32),
        )

    def get(self, request: Request) -> Any:
        """One GET, decoded; SourceError (RateLimited for 429) on failure. No retry here."""
        try:
            response = self.client.get(request.path, params=request.params)
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
        if status >= 500:
            raise SourceError(f"GET {request.path}: HTTP {status}", retryable=True, status=status)
        if status >= 400:
            raise SourceError(
                f"GET {request.path}: HTTP {status} {self._redacted(response.text[:200])}"
                + _hint(status),
                retryable=False,
                status=status,
            )
        try:
            return pydantic_core.from_json(response.content)  # faster than json.loads
        except ValueError as exc:
            raise SourceError(
                f"GET {request.path}: the response is not JSON ({exc})", retryable=True
            ) from None

    def _redacted(self, text: str) -> str:
        """The source's words, without the token should it echo it back."""
        return text.replace(self.token, "***")

    def close(self) -> None:
        self.client.close()


def _hint(status: int) -> str:
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
