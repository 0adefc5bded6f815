"""Lanes: each is its own executor of ``width`` threads for one queue.

Widening one lane adds threads to that lane only; a lane can neither borrow from nor starve
another. This module parses the lanes string (a lane written without a width takes a share of
the threads the pool leaves: ``share``; how many that is, is the settings' business) and holds
a lane's wake-up signal; the threads themselves are run by ``worker``.
"""

from __future__ import annotations

import dataclasses
import re
import threading

from ferryman_worker.errors import ConfigurationError

_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
EXAMPLE = "migrations:4,critical:2,default:3"


@dataclasses.dataclass(frozen=True)
class LaneSpec:
    """One lane: the queue it serves and its number of threads."""

    name: str
    width: int


@dataclasses.dataclass(frozen=True)
class LaneRequest:
    """One lane as written: its width, or None when it takes a share of the pool (``name``)."""

    name: str
    width: int | None


def read_lanes(text: str) -> list[LaneRequest]:
    """Parse ``name[:threads],...`` as written; ConfigurationError names the bad part and the fix.
    A lane without ``:threads`` gets its width from ``share``."""
    if not text or not text.strip():
        raise ConfigurationError(f"lanes is empty: give at least one lane, e.g. {EXAMPLE!r}")
    requests: list[LaneRequest] = []
    for part in text.split(","):
        request = _parse_one(part.strip(), text)
        if any(r.name == request.name for r in requests):
            raise ConfigurationError(
                f"lanes {text!r} names lane {request.name!r} twice: give each lane once"
            )
        requests.append(request)
    return requests


def share(requests: list[LaneRequest], spare: int) -> list[LaneSpec]:
    """The lanes with widths: a lane written without one gets an equal share of ``spare``
    threads; the remainder goes one thread each to the first such lanes, in the order written.
    Lanes given a width keep it (the caller checks that every share is at least 1)."""
    open_count = sum(1 for r in requests if r.width is None)
    each, remainder = divmod(spare, open_count) if open_count else (0, 0)
    specs: list[LaneSpec] = []
    for request in requests:
        if request.width is not None:
            specs.append(LaneSpec(request.name, request.width))
            continue
        specs.append(LaneSpec(request.name, each + (1 if remainder > 0 else 0)))
        remainder -= 1
    return specs


def _parse_one(part: str, text: str) -> LaneRequest:
    name, sep, width_text = part.partition(":")
    if not _NAME.match(name):
        raise ConfigurationError(
            f"lanes {text!r}: {part!r} is not 'name:threads' or 'name' (a lowercase name, then "
            f"optionally a colon and a positive thread count), e.g. {EXAMPLE!r}"
        )
    if not sep:
        return LaneRequest(name, None)
    try:
        width = int(width_text)
    except ValueError:
        raise ConfigurationError(
            f"lanes {text!r}: lane {name!r} has thread count {width_text!r}, not a whole number"
        ) from None
    if width < 1:
        raise ConfigurationError(
            f"lanes {text!r}: lane {name!r} has {width} threads; a lane needs at least 1 "
            "(remove the lane instead)"
        )
    return LaneRequest(name, width)


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
