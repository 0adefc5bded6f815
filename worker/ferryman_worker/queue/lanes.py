"""Lanes: each is its own executor of ``width`` threads for one queue.

Widening one lane adds threads to that lane only; a lane can neither borrow from nor starve
another. This module parses the lanes string and holds a lane's wake-up signal; the threads
themselves are run by ``worker``.
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


def parse_lanes(text: str) -> list[LaneSpec]:
    """Parse ``name:threads,...``; ConfigurationError names the bad part and the fix."""
    if not text or not text.strip():
        raise ConfigurationError(f"lanes is empty: give at least one lane, e.g. {EXAMPLE!r}")
    specs: list[LaneSpec] = []
    for part in text.split(","):
        spec = _parse_one(part.strip(), text)
        if any(s.name == spec.name for s in specs):
            raise ConfigurationError(
                f"lanes {text!r} names lane {spec.name!r} twice: give each lane once"
            )
        specs.append(spec)
    return specs


def _parse_one(part: str, text: str) -> LaneSpec:
    name, sep, width_text = part.partition(":")
    if not sep or not _NAME.match(name):
        raise ConfigurationError(
            f"lanes {text!r}: {part!r} is not 'name:threads' (a lowercase name, a colon, a "
            f"positive thread count), e.g. {EXAMPLE!r}"
        )
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
    return LaneSpec(name, width)


class Lane:
    """A lane's wake-up signal, free of lost wake-ups.

    Threads note ``generation`` before looking for work and wait only if nothing woke the lane
    since: a notification that lands between the look and the wait is never missed.
    """

    def __init__(self, spec: LaneSpec) -> None:
        self.spec = spec
        self._cond = threading.Condition()
        self._generation = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def generation(self) -> int:
        return self._generation

    def wake(self, jobs: int | None = None) -> None:
        """Work may be available: ``jobs`` waiting threads look (None: every one).

        Waking one thread per new job, not all of them, keeps idle threads from racing each
        other for one job (a claim each). A thread between its look and its wait looks again
        whatever the count, so no wake-up is lost.
        """
        with self._cond:
            self._generation += 1
            if jobs is None:
                self._cond.notify_all()
            else:
                self._cond.notify(max(jobs, 1))

    def wait(self, seen: int, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds unless the lane was woken after ``seen``."""
        with self._cond:
            self._cond.wait_for(lambda: self._generation != seen, timeout)
