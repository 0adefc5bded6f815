"""Request counts per endpoint and status code, for tests to prove retries and 429s happened.

Only ``/v1/...`` requests are counted (unknown ones as ``"<METHOD> (unknown)"``), not the control
endpoints (``/healthz``, ``/_truth``, ``/_config``, ``/_stats``) that tests call to look.
"""

import threading
from collections import Counter
from typing import Any


class Stats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, int]] = Counter()

    def record(self, endpoint: str, status: int) -> None:
        with self._lock:
            self._counts[endpoint, status] += 1

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()

    def snapshot(self) -> dict[str, Any]:
        """``{"requests": {"GET /v1/people": {"200": 3, "429": 1}}, "total": 4}``."""
        with self._lock:
            counts = sorted(self._counts.items())
        requests: dict[str, dict[str, int]] = {}
        for (endpoint, status), n in counts:
            requests.setdefault(endpoint, {})[str(status)] = n
        return {"requests": requests, "total": sum(n for _, n in counts)}
