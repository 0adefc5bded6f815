"""The lanes string, ``migrations:4,critical:2,default:3``: each lane's queue and its threads.

Parsed here, below both the settings that check it and the queue that runs its lanes
(``queue.lanes``): the settings need nothing of the queue. A lane written without a width takes
a share of the threads the pool leaves (``share``); how many that is, is the settings' business.
Imports nothing of ferryman's but its errors.
"""

from __future__ import annotations

import dataclasses
import re

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
