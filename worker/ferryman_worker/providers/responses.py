"""What a source's answers mean: a response policy per provider (and per kind).

A status is ``ok`` (below 300 and not listed otherwise), ``retry`` (try again after a backoff:
by default 408 and every 5xx), ``gone`` (the record does not exist any more: recorded as a row
error where the walk allows, by default 404 and 410), ``rate_limited`` (wait, then try again:
by default 429) or ``fail`` (trying again cannot help: the task fails with the source's message,
redacted). A rate-limited answer says how long to wait in ``Retry-After`` (seconds or an HTTP
date), or in a reset header (seconds ahead, or a Unix time), or not at all: then ``backoff``.
"""

from __future__ import annotations

import dataclasses
import email.utils
import time
from collections.abc import Mapping
from typing import Literal

Action = Literal["ok", "retry", "gone", "rate_limited", "fail"]

EPOCH_FLOOR = 1_000_000_000.0
"""A reset value this large is a Unix time, not seconds ahead."""


@dataclasses.dataclass(frozen=True)
class ResponsePolicy:
    retry: frozenset[int] = frozenset({408})
    gone: frozenset[int] = frozenset({404, 410})
    rate_limited: frozenset[int] = frozenset({429})
    fail: frozenset[int] = frozenset()
    retry_after: str = "Retry-After"
    reset: str = ""
    backoff: float = 1.0
    """Seconds to wait after a rate-limited answer that says nothing about when to come back."""

    def action(self, status: int) -> Action:
        for action, statuses in (
            ("fail", self.fail),
            ("rate_limited", self.rate_limited),
            ("gone", self.gone),
            ("retry", self.retry),
        ):
            if status in statuses:
                return action  # type: ignore[return-value]
        if status >= 500:
            return "retry"
        return "fail" if status >= 300 else "ok"  # redirects are never followed

    def wait(self, headers: Mapping[str, str], now: float | None = None) -> float:
        """Seconds to wait after a rate-limited answer (at least one)."""
        now = time.time() if now is None else now
        for name, parse in ((self.retry_after, _retry_after), (self.reset, _reset)):
            value = headers.get(name) if name else None
            seconds = parse(value, now) if value else None
            if seconds is not None:
                return max(1.0, seconds)
        return max(1.0, self.backoff)


def _retry_after(value: str, now: float) -> float | None:
    """RFC 9110: delay-seconds or an HTTP date."""
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return email.utils.parsedate_to_datetime(value).timestamp() - now
    except (TypeError, ValueError, IndexError):
        return None


def _reset(value: str, now: float) -> float | None:
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds - now if seconds >= EPOCH_FLOOR else seconds
