"""HTTP calls to a source API: one boundary where httpx's errors become ours.

Calls never hold a database connection or an open transaction; rate-limit tokens are reserved
by the caller (on the job thread) before a call is made. An answer is read as a stream and
dropped past ``max_response_bytes`` (decoded), and a call ends at ``timeout`` seconds in all,
however slowly its bytes arrive, headers included (``deadline``): one source cannot make a
worker hold unbounded memory or a lane for ever. The client applies its credential through an
``httpx.Auth``; its guard (an httpx request hook) refuses a request to a host the credential is
not bound to before it is sent, and no redirect is ever followed. An error's message says the
status code and its standard reason phrase, never the source's own words: those go to the log
only, redacted, then cut.
"""

from __future__ import annotations

import dataclasses
import http
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import httpx
import pydantic_core

from ferryman_worker.engine import credentials, deadline, ratelimit
from ferryman_worker.engine.credentials import RequestRefused, redact
from ferryman_worker.errors import FerrymanError
from ferryman_worker.providers import Reply, Request, ResponsePolicy

DEFAULT_POLICY = ResponsePolicy()
MAX_RESPONSE_BYTES = 64 * 2**20
"""The default cap on one answer's (decoded) size: FERRYMAN_SOURCE_MAX_RESPONSE_BYTES."""

log = logging.getLogger("ferryman.engine.source")


REFUSED = (401, 403)
"""The statuses of a source refusing the credential."""


class SourceError(FerrymanError):
    """The source failed the call; ``retryable`` says whether trying again may help, ``status``
    is the HTTP status it answered with (None: no answer, or not one of its statuses), ``gone``
    that it says the record does not exist (any more)."""

    def __init__(
        self, message: str, *, retryable: bool, status: int | None = None, gone: bool = False
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.gone = gone


class SourceRefused(SourceError):
    """The source refused the credential (HTTP 401 or 403): the run names the cause
    (``engine.causes``)."""


class SourceTimeout(SourceError):
    """The source did not answer within the client's timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


class ResponseTooLarge(SourceError):
    """An answer larger than the client's cap: dropped unread past it; the same call would get
    the same answer, so retrying cannot help."""

    def __init__(self, what: str, cap: int) -> None:
        super().__init__(
            f"{what}: the answer is larger than {cap} bytes, the cap on one answer (the"
            " worker's FERRYMAN_SOURCE_MAX_RESPONSE_BYTES, the chart's"
            " worker.sourceMaxResponseBytes): ask for smaller pages (spec.options.pageSize), or"
            " raise the cap",
            retryable=False,
        )


class RateLimited(SourceError):
    """The source is rate-limiting us: wait ``retry_after`` seconds (the source said so), or
    back off from ``backoff`` seconds, doubling (None: it did not say for how long)."""

    def __init__(self, retry_after: float | None, status: int = 429, backoff: float = 1.0) -> None:
        how_long = "" if retry_after is None else f" for {retry_after:.0f}s"
        super().__init__(f"the source is rate-limiting us{how_long}", retryable=True, status=status)
        self.backoff = backoff
        self.retry_after = retry_after

    def pause(self, attempt: int) -> float:
        """Seconds to pause the credential after the ``attempt``-th 429 of a call in a row."""
        if self.retry_after is None:
            return ratelimit.backoff(attempt, base=self.backoff)
        return self.retry_after


Guard = Callable[[httpx.Request], None]
"""Called with every request before it is sent; raises to refuse it."""


@dataclasses.dataclass
class SourceClient:
    """A keep-alive HTTP client for one source and credential (thread-safe: httpx.Client).

    ``auth`` puts the credential on each request; ``guard`` (an httpx request hook) may refuse a
    request by raising; redirects are never followed. ``secrets`` are redacted from every
    message (the auth's own secrets are too)."""

    base_url: str
    auth: httpx.Auth
    timeout: float = 10.0
    """Seconds one call may take in all: connecting, the answer's headers and its body."""
    guard: Guard | None = None
    secrets: tuple[str, ...] = ()
    max_response_bytes: int = MAX_RESPONSE_BYTES
    client: httpx.Client = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(
            base_url=self.base_url,
            auth=self.auth,
            headers={"Accept": "application/json"},
            timeout=httpx.Timeout(self.timeout, connect=5.0),
            transport=deadline.transport(
                httpx.Limits(max_connections=32, max_keepalive_connections=32)
            ),
            follow_redirects=False,
            event_hooks={"request": [self._within_base, *([self.guard] if self.guard else [])]},
        )
        self._base = httpx.URL(self.base_url)

    def _within_base(self, request: httpx.Request) -> None:
        """A request hook: OutsideBase unless the request stays on the base URL's scheme, host
        and port, below its path, with no dot segment (``..``, also percent-encoded)."""
        if not credentials.within_base(self._base, request.url):
            raise credentials.OutsideBase(str(request.url), self.base_url)

    def call(self, request: Request, policy: ResponsePolicy = DEFAULT_POLICY) -> Reply:
        """One call, its body decoded; SourceError (RateLimited) as ``policy`` says. No retry."""
        what = f"{request.method} {self._redacted(request.path)}"
        try:
            with deadline.within(self.timeout):
                response, content = self._send(request, what)
        except RequestRefused as exc:
            raise SourceError(f"{what}: {exc}", retryable=False) from None
        except httpx.TimeoutException:
            raise SourceTimeout(self._timed_out(what)) from None
        except httpx.ConnectError:
            raise SourceError(
                f"{what}: cannot connect to {self.base_url} (check"
                " spec.source.baseURL, and that the source is up and reachable)",
                retryable=True,
            ) from None
        except httpx.TransportError as exc:
            raise SourceError(f"{what} failed: {type(exc).__name__}", retryable=True) from None
        status = response.status_code
        action = policy.action(status)
        if action != "ok":
            self._log_answer(what, response, content)
        if action == "rate_limited":
            raise RateLimited(_wait(policy, response.headers), status, policy.backoff)
        if action == "retry":
            error = SourceRefused if status in REFUSED else SourceError
            raise error(f"{what}: HTTP {_said(status)}", retryable=True, status=status)
        if action != "ok":
            error = SourceRefused if status in REFUSED else SourceError
            raise error(
                f"{what}: HTTP {_said(status)}" + _hint(status, self.auth),
                retryable=False,
                status=status,
                gone=action == "gone",
            )
        try:
            body = pydantic_core.from_json(content) if content else None
        except ValueError as exc:
            raise SourceError(f"{what}: the response is not JSON ({exc})", retryable=True) from None
        return Reply(status, response.headers, body)

    def _send(self, request: Request, what: str) -> tuple[httpx.Response, bytes]:
        """The answer and its body, read whole (within the cap), its connection released."""
        response = self.client.send(
            self.client.build_request(
                request.method,
                request.path,
                params=dict(request.params) or None,
                headers=dict(request.headers) or None,
                json=request.json,
            ),
            stream=True,
        )
        try:
            return response, self._read(response, what)
        finally:
            response.close()

    def _read(self, response: httpx.Response, what: str) -> bytes:
        """The answer's body, decoded: ResponseTooLarge past the cap (a declared length over it
        is refused unread)."""
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_response_bytes:
            raise ResponseTooLarge(what, self.max_response_bytes)
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_response_bytes:
                raise ResponseTooLarge(what, self.max_response_bytes)
            chunks.append(chunk)
        return b"".join(chunks)

    def _timed_out(self, what: str) -> str:
        return (
            f"{what} took longer than {self.timeout:g}s in all (the worker's"
            " FERRYMAN_SOURCE_TIMEOUT, the chart's worker.sourceTimeout)"
        )

    def get(self, request: Request) -> Any:
        """One call's decoded body."""
        return self.call(request).body

    def _redacted(self, text: str) -> str:
        """``text`` without a secret should it hold one (the auth's are read now: an OAuth2
        access token changes); redacted, then cut."""
        return redact(text, (*self.secrets, *getattr(self.auth, "secrets", ())))

    def _log_answer(self, what: str, response: httpx.Response, content: bytes) -> None:
        """The source's words on a failed call, for whoever reads the worker's log: redacted,
        then cut (they never reach a run's status)."""
        text = content.decode(response.encoding or "utf-8", "replace")
        log.info("%s: HTTP %s: %s", what, response.status_code, self._redacted(text))

    def close(self) -> None:
        self.client.close()


def _wait(policy: ResponsePolicy, headers: httpx.Headers) -> float | None:
    """How long a rate-limited answer asks us to wait: the standard headers (``Retry-After``,
    the IETF ``RateLimit`` fields, ``X-RateLimit-Reset``), else the policy's own reset header;
    None: it does not say (the caller backs off)."""
    wait = ratelimit.retry_after(headers)
    if wait is None and policy.reset and headers.get(policy.reset):
        wait = ratelimit.retry_after({"x-ratelimit-reset": headers[policy.reset]})
    return wait


def _said(status: int) -> str:
    """``403 Forbidden``: the code and its standard phrase (not the one the source sent)."""
    try:
        return f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _hint(status: int, auth: httpx.Auth | None) -> str:
    if 300 <= status < 400:
        return (
            " (a redirect: ferryman follows none, so a credential never travels to where it"
            " points; set spec.source.baseURL to the source's own address)"
        )
    if status in REFUSED:
        return (
            f" (the source refused {getattr(auth, 'sends', 'the credential')}: check the keys"
            " of the Secret that spec.source.credentialsSecretRef names)"
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
