"""Per-request fault injection: server errors and stalls, drawn from one seeded generator.

Draws are per request, not per record, so a client's retry of a failed call can succeed.
The sequence is seeded (``"<seed>:faults"``), but concurrent requests interleave their draws,
so only single-threaded clients see a reproducible pattern.
"""

import random
import threading
from dataclasses import dataclass

ERROR_STATUSES = (500, 502, 503)


@dataclass(frozen=True)
class Fault:
    stall: bool = False
    """Sleep ``stall_seconds`` before answering (a timeout for an impatient client)."""
    status: int | None = None
    """Answer with this 5xx status instead of the data."""


NO_FAULT = Fault()


class Faults:
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"{seed}:faults")
        self._lock = threading.Lock()

    def draw(self, error_rate: float, stall_rate: float) -> Fault:
        if error_rate <= 0 and stall_rate <= 0:
            return NO_FAULT
        with self._lock:
            stall = self._rng.random() < stall_rate
            failed = self._rng.random() < error_rate
            status = self._rng.choice(ERROR_STATUSES) if failed else None
        return Fault(stall=stall, status=status)
