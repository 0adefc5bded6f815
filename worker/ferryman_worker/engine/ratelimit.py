"""The source's rate limit, leased centrally from a budget in PostgreSQL.

Every worker of one source credential shares one budget row. A process leases tokens in
chunks (one row update per lease, never per call) and spends them locally; a lease is only
trusted for ``lease_seconds``, so a pause reaches every process within that time. A 429 with
``Retry-After`` drains the budget and pauses it for all.

What a source says about its limits is read here too, from any response's headers: how long a
429 asks us to wait (``retry_after``: ``Retry-After`` as seconds or an HTTP date, else a reset
header), and the backoff when it says nothing (``backoff``).
"""

from __future__ import annotations

import email.utils
import hashlib
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping

from ferryman_worker import metrics
from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection

log = logging.getLogger("ferryman.engine")

UNLIMITED = 1e12
"""Capacity and refill of a credential with no declared budget: only 429s pause it."""


MIN_WAIT = 1.0
"""The shortest pause after a 429, whatever the source said (a date in the past, ``0``)."""
MAX_WAIT = 3600.0
"""The longest pause a source's header can ask for; a longer one (a daily quota, a bad clock)
is cut to this, and the calls that fail again count toward the retry limit."""
EPOCH_SECONDS = 1e9
"""A reset header at or above this is a Unix time (GitHub's style), below it a delay."""


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds a 429 (or 503) asks us to wait: ``Retry-After`` as delay-seconds or an HTTP
    date; else a reset header (``RateLimit``'s ``t``, ``RateLimit-Reset``,
    ``X-RateLimit-Reset``, as a delay or a Unix time). None when the source says nothing
    usable (the caller then backs off). Between ``MIN_WAIT`` and ``MAX_WAIT``."""
    now = time.time() if now is None else now
    value = headers.get("retry-after")
    wait = _delay_or_date(value, now) if value else None
    if wait is None:
        wait = _reset_after(headers, now)
    return None if wait is None else min(MAX_WAIT, max(MIN_WAIT, wait))


def backoff(attempt: int, base: float = 1.0, cap: float = 60.0) -> float:
    """The pause after the ``attempt``-th 429 in a row (1, 2, ...) that said nothing about
    when to come back: 1 s, 2 s, 4 s ... up to ``cap``."""
    return min(cap, base * 2.0 ** max(0, attempt - 1))


def _delay_or_date(value: str, now: float) -> float | None:
    """RFC 9110 Retry-After: a non-negative integer of seconds, or an HTTP date."""
    text = value.strip()
    number = _number(text)
    if number is not None:
        return number
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is always GMT
        return None
    return when.timestamp() - now


def _reset_after(headers: Mapping[str, str], now: float) -> float | None:
    ietf = _structured(headers.get("ratelimit", "")).get("t")
    for value in (ietf, headers.get("ratelimit-reset"), headers.get("x-ratelimit-reset")):
        number = _number(value.strip()) if value else None
        if number is not None:
            return number - now if number >= EPOCH_SECONDS else number
    return None


def _number(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


_PARAMETER = re.compile(r"(?:^|[;,])\s*([a-z]+)\s*=\s*([^;,\s]+)")
_IETF_NAMES = {"remaining": "r", "reset": "t", "limit": "q", "window": "w"}


def _structured(value: str) -> dict[str, str]:
    """The parameters of an IETF ``RateLimit`` / ``RateLimit-Policy`` field, as text, under the
    current draft's names: its first item's (``"default";r=50;t=30``), or the older draft's
    dictionary (``limit=100, remaining=50, reset=30``)."""
    fields: dict[str, str] = {}
    for name, text in _PARAMETER.findall(value):
        fields.setdefault(_IETF_NAMES.get(name, name), text.strip('"'))
    return fields


def credential_key(base_url: str, token: str) -> str:
    """Names a source credential without revealing it."""
    return hashlib.sha256(f"{base_url}\0{token}".encode()).hexdigest()[:24]


class Budget:
    """This process's view of one credential's budget; thread-safe."""

    def __init__(
        self,
        credential: str,
        capacity: float = UNLIMITED,
        refill_per_s: float = UNLIMITED,
        *,
        chunk: float = 100.0,
        lease_seconds: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.credential = credential
        self.capacity = capacity
        self.refill_per_s = refill_per_s
        self.chunk = chunk if capacity < UNLIMITED else 1e6
        self.lease_seconds = lease_seconds
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = 0.0
        self._leased_at = float("-inf")
        self._ensured = False
        self._paused_until = 0.0

    def reserve(self, conn: Connection, cost: float) -> None:
        """Block until ``cost`` tokens are this caller's. Call on a job thread, between
        transactions: a lease is one short autocommit update."""
        while True:
            with self._lock:
                if time.monotonic() - self._leased_at > self.lease_seconds:
                    self._tokens = 0.0
                if self._tokens >= cost:
                    self._tokens -= cost
                    return
                wait = self._lease(conn, max(cost, self.chunk) - self._tokens, cost)
            if wait > 0:
                metrics.token_wait(self.credential, wait)
                self._sleep(wait)

    def pause(self, conn: Connection, seconds: float) -> None:
        """The source said 429 / Retry-After: pause every worker of the credential."""
        with self._lock:
            self._tokens = 0.0
            conn.execute(
                queries.engine("pause_budget"), {"credential": self.credential, "seconds": seconds}
            )
            now = time.monotonic()
            until = now + seconds
            if until > self._paused_until:
                metrics.paused(self.credential, until - max(now, self._paused_until))
                self._paused_until = until
                log.info(
                    "source credential %s paused for %gs: the source answered 429",
                    self.credential,
                    seconds,
                )

    def _lease(self, conn: Connection, want: float, cost: float) -> float:
        """Lease up to ``want`` tokens; returns seconds to wait before trying again (0: got)."""
        if not self._ensured:
            conn.execute(
                queries.engine("ensure_budget"),
                {
                    "credential": self.credential,
                    "capacity": self.capacity,
                    "refill_per_s": self.refill_per_s,
                },
            )
            self._ensured = True
        row = conn.execute(
            queries.engine("lease_tokens"), {"credential": self.credential, "want": want}
        ).fetchone()
        if row is None:  # the row vanished (a reset database): create it again next time
            self._ensured = False
            return 0.1
        self._tokens += float(row["granted"])
        if self.capacity < UNLIMITED:
            metrics.tokens(self.credential, leased=float(row["granted"]))
        self._leased_at = time.monotonic()
        if float(row["paused_for"]) > 0:
            return float(row["paused_for"])
        if self._tokens >= cost:
            return 0.0
        return min(5.0, (cost - self._tokens) / max(float(row["refill_per_s"]), 1e-9))


class Budgets:
    """One Budget per credential in this process, so leftovers serve the next task."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._budgets: dict[str, Budget] = {}

    def get(self, credential: str, capacity: float | None, refill_per_s: float | None) -> Budget:
        with self._lock:
            budget = self._budgets.get(credential)
            if budget is None:
                budget = Budget(credential, capacity or UNLIMITED, refill_per_s or UNLIMITED)
                self._budgets[credential] = budget
            return budget
