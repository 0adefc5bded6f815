"""A round of source calls made as every walk makes them: each round's rate-limit tokens
reserved first (the credential's budget, shared by every worker), then the calls (in turn, or on
fetch threads that hold no database connection), then what failed retryably goes round again: a
429 pauses the budget for every worker, a 5xx or a timeout backs off first.

Shared by a task's walk (``scope``) and by a verification (``verify``): both spend the same
budget, through the same client, with the same retries."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ferryman_worker import metrics
from ferryman_worker.db.connect import Connection
from ferryman_worker.engine.ratelimit import Budget
from ferryman_worker.engine.source import (
    RateLimited,
    Retry,
    SourceClient,
    SourceError,
    SourceTimeout,
)
from ferryman_worker.providers import Request, ResponsePolicy

Mapper = Callable[[Callable[[Request], Any], Iterable[Request]], Iterator[Any]]
"""How a round's calls are made: ``map`` (in turn) or a thread pool's ``map``."""


@dataclasses.dataclass
class Calls:
    """The calls of one job thread to one source: its ``conn`` leases tokens (between
    transactions), ``gate`` is called before a failed round goes again (it raises to stop)."""

    conn: Connection
    client: SourceClient
    budget: Budget
    policy: ResponsePolicy
    retry: Retry
    gate: Callable[[Connection], None] = lambda conn: None

    def all(
        self, requests: Sequence[Request], map_: Mapper = map, *, gone_ok: bool = False
    ) -> list[Any]:
        """The requests' answers, in order, in rounds. A call that failed ``retry.attempts``
        times, or a refusal (4xx), raises; with ``gone_ok`` a record the source says is gone
        (404, 410) is answered by its ``SourceError``."""
        answers: dict[int, Any] = {}
        tries = [0] * len(requests)
        pending = list(range(len(requests)))
        while pending:
            cost = sum(requests[i].cost for i in pending)
            self.budget.reserve(self.conn, cost, max(requests[i].cost for i in pending))
            metrics.tokens(self.budget.credential, spent=cost)
            results = map_(self._call, [requests[i] for i in pending])
            failed: dict[int, SourceError] = {}
            for i, result in zip(pending, results, strict=True):
                if isinstance(result, SourceError) and not (gone_ok and result.gone):
                    tries[i] += 1
                    self._give_up_or_pause(result, tries[i])
                    failed[i] = result
                else:
                    answers[i] = result
            if failed:
                self.gate(self.conn)  # suspended or cancelled meanwhile: stop retrying
                if any(not isinstance(error, RateLimited) for error in failed.values()):
                    self.retry.sleep(max(tries[i] for i in failed) - 1)
            pending = list(failed)
        return [answers[i] for i in range(len(requests))]

    def _give_up_or_pause(self, error: SourceError, tries: int) -> None:
        """Raise if trying again cannot help, or the call failed ``retry.attempts`` times; a
        429 pauses the credential's budget for every worker."""
        if not error.retryable:
            raise error
        if tries >= self.retry.attempts:
            raise SourceError(f"{error} (tried {tries} times)", retryable=True, status=error.status)
        if isinstance(error, RateLimited):
            self.budget.pause(self.conn, error.pause(tries))

    def _call(self, request: Request) -> Any:
        """One call's answer, or the SourceError it failed with (``map_`` must not raise)."""
        began = time.perf_counter()
        try:
            with metrics.in_flight():
                answer = self.client.call(request, self.policy)
        except SourceError as exc:
            metrics.source_call(
                self.budget.credential,
                exc.status,
                isinstance(exc, SourceTimeout),
                time.perf_counter() - began,
            )
            return exc
        metrics.source_call(self.budget.credential, 200, False, time.perf_counter() - began)
        return answer
