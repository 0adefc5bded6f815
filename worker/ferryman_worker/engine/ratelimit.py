"""The source's rate limit, leased centrally from a budget in PostgreSQL.

Every worker of one source credential shares one budget row. A process leases tokens in
chunks (one row update per lease, never per call) and spends them locally; a lease is only
trusted for ``lease_seconds``, so a pause reaches every process within that time. A 429 with
``Retry-After`` drains the budget and pauses it for all.

What a source says about its limits is read here too, from any response's headers: how long a
429 asks us to wait (``retry_after``: ``Retry-After`` as seconds or an HTTP date, else a reset
header), the backoff when it says nothing (``backoff``), and what is left of the account's quota
(``quota``: ``X-RateLimit-Remaining/-Reset``, the IETF ``RateLimit`` fields). The last is
reconciled into the shared budget, so quota that another integration spent on the same account
slows every worker before the source has to refuse them.
"""

from __future__ import annotations

import dataclasses
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
REFILL_HEADROOM = 0.5
"""The share of a spent quota waited for before calling again (see ``Quota.wait_for``)."""
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


@dataclasses.dataclass(frozen=True)
class Quota:
    """What one response said is left of the account's quota, in the provider's cost units."""

    remaining: float
    reset_after: float | None
    """Seconds until the quota comes back (None: not said)."""
    limit: float | None = None
    """The whole quota, which is back by the reset (None: not said)."""

    def wait_for(self, cost: float) -> float | None:
        """Seconds until ``cost``, or half the quota if more, is left, taking the quota to come
        back evenly until its reset (a token bucket's refill; a fixed window comes back whole at
        the reset, and a call made before it meets a 429 that says when); None: the reset is
        not said. Half, not a call's worth: whoever spent the quota spends it still, and a wait
        for exactly one call races them for it; not the whole: a full bucket wastes its refill."""
        if self.reset_after is None:
            return None
        if self.limit is None or self.limit <= self.remaining:
            return self.reset_after
        want = max(cost, self.limit * REFILL_HEADROOM)
        share = (want - self.remaining) / (self.limit - self.remaining)
        return self.reset_after * min(1.0, max(0.0, share))


def quota(headers: Mapping[str, str], now: float | None = None) -> Quota | None:
    """The quota a response reports (the IETF ``RateLimit`` field's ``r``/``t``,
    ``RateLimit-Remaining/-Reset`` or ``X-RateLimit-Remaining/-Reset``); None if none."""
    now = time.time() if now is None else now
    ietf = _structured(headers.get("ratelimit", "")).get("r")
    for value in (ietf, headers.get("ratelimit-remaining"), headers.get("x-ratelimit-remaining")):
        remaining = _number(value.strip()) if value else None
        if remaining is not None:
            reset = _reset_after(headers, now)
            reset = None if reset is None else min(MAX_WAIT, max(0.0, reset))
            return Quota(remaining, reset, _limit(headers))
    return None


def _limit(headers: Mapping[str, str]) -> float | None:
    """The whole quota: the IETF ``RateLimit-Policy``'s ``q`` (the older draft's ``limit``),
    else ``RateLimit-Limit`` or ``X-RateLimit-Limit``."""
    policy = _structured(headers.get("ratelimit-policy", "")).get("q")
    ietf = policy or _structured(headers.get("ratelimit", "")).get("q")  # the older draft's
    for value in (ietf, headers.get("ratelimit-limit"), headers.get("x-ratelimit-limit")):
        limit = _number(value.strip()) if value else None
        if limit is not None:
            return limit
    return None


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
        self._seen: Quota | None = None
        self._largest_cost = 0.0
        self._reconciled_at = float("-inf")

    def reserve(self, conn: Connection, cost: float, largest_call: float | None = None) -> None:
        """Block until ``cost`` tokens are this caller's (a round of calls, the largest of which
        costs ``largest_call``; by default one call of ``cost``). Call on a job thread, between
        transactions: a lease is one short autocommit update."""
        while True:
            with self._lock:
                self._largest_cost = max(self._largest_cost, largest_call or cost)
                if self._seen is not None and self._reconcile_due():
                    self._reconcile(conn, self._seen)
                if time.monotonic() - self._leased_at > self.lease_seconds:
                    self._tokens = 0.0
                if self._tokens >= cost:
                    self._tokens -= cost
                    return
                wait = self._lease(conn, max(cost, self.chunk) - self._tokens, cost)
            if wait > 0:
                metrics.token_wait(self.credential, wait)
                self._sleep(wait)

    def observe(self, headers: Mapping[str, str]) -> None:
        """A response's headers, on any thread and without the database: what they say is left
        of the quota caps this process's tokens now and the shared budget at the next
        ``reserve``."""
        seen = quota(headers)
        if seen is None:
            return
        with self._lock:
            self._tokens = min(self._tokens, seen.remaining)
            self._seen = seen

    def _reconcile_due(self) -> bool:
        """Tell the shared budget at most once per lease period, unless the quota runs low."""
        assert self._seen is not None
        low = self._seen.remaining < self.chunk
        return low or time.monotonic() - self._reconciled_at >= self.lease_seconds

    def _reconcile(self, conn: Connection, seen: Quota) -> None:
        """The shared budget holds no more than the source says is left; with less left than
        the dearest call costs (a call, not a round: the source charges call by call, and a
        round may cost its whole quota), every worker pauses until half of it is back
        (``Quota.wait_for``; a declared refill cannot know what others spend meanwhile: waiting
        for it alone would meet a 429 at every call)."""
        cost = max(1.0, self._largest_cost)
        wait = seen.wait_for(cost) if seen.remaining < cost else None
        pause = wait or 0.0
        if not self._ensured:
            self._ensure(conn)
        conn.execute(
            queries.engine("reconcile_budget"),
            {"credential": self.credential, "remaining": seen.remaining, "pause": pause},
        )
        self._seen, self._reconciled_at = None, time.monotonic()
        if pause:
            self._note_pause(pause, "the source reported its quota spent")

    def pause(self, conn: Connection, seconds: float) -> None:
        """The source said 429 / Retry-After: pause every worker of the credential."""
        with self._lock:
            self._tokens = 0.0
            conn.execute(
                queries.engine("pause_budget"), {"credential": self.credential, "seconds": seconds}
            )
            self._note_pause(seconds, "the source answered 429")

    def _note_pause(self, seconds: float, why: str) -> None:
        now = time.monotonic()
        until = now + seconds
        if until > self._paused_until:
            metrics.paused(self.credential, until - max(now, self._paused_until))
            self._paused_until = until
            log.info("source credential %s paused for %gs: %s", self.credential, seconds, why)

    def _lease(self, conn: Connection, want: float, cost: float) -> float:
        """Lease up to ``want`` tokens; returns seconds to wait before trying again (0: got)."""
        if not self._ensured:
            self._ensure(conn)
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

    def _ensure(self, conn: Connection) -> None:
        conn.execute(
            queries.engine("ensure_budget"),
            {
                "credential": self.credential,
                "capacity": self.capacity,
                "refill_per_s": self.refill_per_s,
            },
        )
        self._ensured = True


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

    def observe(self, credential: str, headers: Mapping[str, str]) -> None:
        """A response's headers for ``credential``'s budget (ignored before it exists)."""
        with self._lock:
            budget = self._budgets.get(credential)
        if budget is not None:
            budget.observe(headers)
