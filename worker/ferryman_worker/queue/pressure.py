"""Pressure: how busy the database is, asked at most once a second per process.

Jobs registered with ``pressure=True`` are deferred with backoff, not run, while more queries
than the threshold are active: a busy database gets fewer new transactions, and the deferred
job's own state is untouched.
"""

from __future__ import annotations

import threading
import time

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection


class PressureGauge:
    """Caches the active-query count for ``ttl`` seconds."""

    def __init__(self, threshold: int, ttl: float = 1.0) -> None:
        self.threshold = threshold
        self._ttl = ttl
        self._lock = threading.Lock()
        self._value = 0
        self._read_at = float("-inf")

    def active_queries(self, conn: Connection) -> int:
        with self._lock:
            now = time.monotonic()
            if now - self._read_at >= self._ttl:
                row = conn.execute(queries.get("active_queries")).fetchone()
                self._value = int(row["active"]) if row else 0
                self._read_at = now
            return self._value

    def over(self, conn: Connection) -> bool:
        """True when the database has more active queries than the threshold."""
        return self.active_queries(conn) > self.threshold
