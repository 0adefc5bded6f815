"""Token buckets, one per API key: a call is paid in full or refused, never partly charged.

A bucket starts full at ``capacity`` and gains ``refill_per_s`` tokens per second up to it. A call
that cannot be paid takes nothing and learns how long to wait; the API turns that into HTTP 429
with ``Retry-After``. Capacity 0 disables the budget. Reconfiguring refills every bucket.

Every answer tells the caller what is left, as real APIs do, in both common dialects:
``X-RateLimit-Limit/-Remaining/-Reset`` and the IETF draft's ``RateLimit`` and
``RateLimit-Policy`` (``rate_headers``). Reset is the seconds until the bucket is full again.
"""

import email.utils
import math
import threading
import time
from collections.abc import Callable

MAX_RETRY_AFTER = 3600
"""Retry-After, in seconds, when the bucket never refills (refill rate 0)."""


class Budgets:
    def __init__(
        self,
        capacity: float,
        refill_per_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, as of clock)
        self.capacity = capacity
        self.refill_per_s = refill_per_s

    def configure(self, capacity: float, refill_per_s: float) -> None:
        """New limits; every key starts again with a full bucket."""
        with self._lock:
            self.capacity, self.refill_per_s = capacity, refill_per_s
            self._buckets.clear()

    def charge(self, key: str, cost: float) -> float | None:
        """Take ``cost`` tokens from ``key``'s bucket: None when paid, else seconds to wait."""
        if self.capacity <= 0 or cost <= 0:
            return None
        with self._lock:
            now = self._clock()
            tokens = self._tokens(key, now)
            if tokens >= cost:
                self._buckets[key] = (tokens - cost, now)
                return None
            self._buckets[key] = (tokens, now)
            return (cost - tokens) / self.refill_per_s if self.refill_per_s > 0 else math.inf

    def left(self, key: str) -> tuple[float, float] | None:
        """``key``'s tokens now and the seconds until its bucket is full again; None when the
        budget is off."""
        if self.capacity <= 0:
            return None
        with self._lock:
            tokens = self._tokens(key, self._clock())
        missing = self.capacity - tokens
        full_in = missing / self.refill_per_s if self.refill_per_s > 0 else math.inf
        return tokens, full_in if missing > 0 else 0.0

    def remaining(self) -> dict[str, float]:
        """Tokens in each known key's bucket, now."""
        with self._lock:
            now = self._clock()
            return {key: round(self._tokens(key, now), 3) for key in self._buckets}

    def _tokens(self, key: str, now: float) -> float:
        """The bucket's tokens at ``now``: full if unknown, else refilled since last use."""
        tokens, stamp = self._buckets.get(key, (self.capacity, now))
        return min(self.capacity, tokens + max(0.0, now - stamp) * self.refill_per_s)


class Throttle:
    """Each API key's first calls, refused whatever its bucket holds (``throttle_first``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refused: dict[str, int] = {}  # key -> calls refused so far (at most ``first``)

    def refuses(self, key: str, first: int) -> bool:
        """Whether this call of ``key`` is one of its first ``first`` (and so refused)."""
        if first <= 0:
            return False
        with self._lock:
            refused = self._refused.get(key, 0)
            if refused >= first:
                return False
            self._refused[key] = refused + 1
            return True

    def restart(self) -> None:
        """Count every key's calls from now."""
        with self._lock:
            self._refused.clear()


def retry_after(wait: float) -> int:
    """Whole seconds for the Retry-After header: at least 1, rounded up, capped."""
    if not math.isfinite(wait):
        return MAX_RETRY_AFTER
    return max(1, min(MAX_RETRY_AFTER, math.ceil(wait)))


def retry_after_header(seconds: int, form: str, now: float | None = None) -> str:
    """Retry-After's value: ``seconds`` as a number, or (form ``date``) as the HTTP date that
    many seconds from now, rounded up to a whole second so it is never sooner."""
    if form != "date":
        return str(seconds)
    moment = math.ceil(time.time() if now is None else now) + seconds
    return email.utils.formatdate(moment, usegmt=True)


def rate_headers(budgets: Budgets, key: str) -> tuple[tuple[str, str], ...]:
    """What is left of ``key``'s budget, as response headers (none when the budget is off)."""
    left = budgets.left(key)
    if left is None:
        return ()
    tokens, full_in = left
    remaining, reset = int(tokens), retry_after(full_in) if full_in > 0 else 0
    window = retry_after(
        budgets.capacity / budgets.refill_per_s if budgets.refill_per_s else math.inf
    )
    limit = int(budgets.capacity)
    return (
        ("X-RateLimit-Limit", str(limit)),
        ("X-RateLimit-Remaining", str(remaining)),
        ("X-RateLimit-Reset", str(reset)),
        ("RateLimit-Policy", f'"budget";q={limit};w={window}'),
        ("RateLimit", f'"budget";r={remaining};t={reset}'),
    )
