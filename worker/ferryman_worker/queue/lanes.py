"""Lanes: each is its own executor of ``width`` threads for one queue.

Widening one lane adds threads to that lane only; a lane can neither borrow from nor starve
another. This module holds a lane's wake-up signal; the lanes string is parsed by
``lanespec``, and the threads themselves are run by ``worker``.
"""

from __future__ import annotations

import threading

from ferryman_worker.lanespec import LaneSpec


class Lane:
    """A lane's wake-ups, counted: how many new jobs were announced and not yet looked for.

    A notification for n new jobs adds n credits and wakes n threads; a thread spends a credit
    per claim, so one job costs one claim however many threads are idle (waking them all would
    cost one claim per thread). A wake-up of unknown size (the poll, a reconnect) puts the lane
    in draining mode: its threads claim until one finds nothing. Credits and the mode are state,
    not a signal, so a wake-up that lands while no thread waits is kept, never lost.
    """

    def __init__(self, spec: LaneSpec) -> None:
        self.spec = spec
        self._cond = threading.Condition()
        self._generation = 0
        self._credits = 0
        self._draining = True  # at start, look for what is already there
        self.waiting = 0
        """Threads asleep in ``wait`` now."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def generation(self) -> int:
        """Changes at every wake-up; note it before a claim, for ``found_nothing``."""
        return self._generation

    def wake(self, jobs: int | None = None) -> None:
        """``jobs`` new jobs are due: that many threads look. None: every thread looks, and
        keeps looking until nothing is left."""
        with self._cond:
            self._generation += 1
            if jobs is None:
                self._draining = True
                self._cond.notify_all()
            else:
                self._credits += max(jobs, 1)
                self._cond.notify(max(jobs, 1))

    def should_claim(self) -> bool:
        """Whether a thread that just finished a job should claim another (spends a credit)."""
        with self._cond:
            if self._draining:
                return True
            if self._credits > 0:
                self._credits -= 1
                return True
            return False

    def found_nothing(self, seen: int) -> bool:
        """A claim begun at generation ``seen`` found nothing: what was announced before it is
        gone (taken by others). True: the thread may sleep. False: jobs were announced while
        the claim ran, so it claims again: its snapshot may predate them, and the threads that
        spent their credits may have taken the jobs it could not lock (announced earlier), not
        them. Sleeping then lost a job until the next poll."""
        with self._cond:
            if self._generation != seen:
                return False
            self._credits = 0
            self._draining = False
            return True

    def wait(self, timeout: float) -> None:
        """Sleep until there is something to look for, at most ``timeout`` seconds."""
        with self._cond:
            self.waiting += 1
            try:
                self._cond.wait_for(lambda: self._draining or self._credits > 0, timeout)
            finally:
                self.waiting -= 1
