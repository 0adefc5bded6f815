"""What a source's answers mean: a response policy per provider (and per kind).

A status is ``ok`` (below 300 and not listed otherwise), ``retry`` (try again after a backoff:
by default 408 and every 5xx), ``gone`` (the record does not exist any more: recorded as a row
error where the walk allows, by default 404 and 410), ``rate_limited`` (wait, then try again:
by default 429) or ``fail`` (trying again cannot help: the task fails with the source's message,
redacted). How long a rate-limited answer asks us to wait is read by the engine
(``engine.ratelimit.retry_after``, and the policy's own ``reset`` header); when it does not say,
the pause starts at ``backoff`` and doubles.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

Action = Literal["ok", "retry", "gone", "rate_limited", "fail"]


@dataclasses.dataclass(frozen=True)
class ResponsePolicy:
    retry: frozenset[int] = frozenset({408})
    gone: frozenset[int] = frozenset({404, 410})
    rate_limited: frozenset[int] = frozenset({429})
    fail: frozenset[int] = frozenset()
    reset: str = ""
    """A reset header of the source's own (seconds ahead, or a Unix time), read when the
    standard ones (``Retry-After``, ``RateLimit``, ``X-RateLimit-Reset``) are absent."""
    backoff: float = 1.0
    """The first pause after a rate-limited answer that says nothing about when to come back
    (doubling while it keeps saying nothing)."""

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
