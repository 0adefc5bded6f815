"""Suspend, resume, retry, verification and time-to-live, decided from the spec and what the
database says."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Final, Literal

from ferryman_worker.contract import RunProgress

FINISHED: Final = ("Succeeded", "Failed", "Cancelled")


def suspension(wanted: bool, running: bool, suspended: bool) -> Literal["suspend", "resume"] | None:
    """What to do so the run's suspension matches ``spec.suspend``; only a running run moves."""
    if not running or wanted == suspended:
        return None
    return "suspend" if wanted else "resume"


def retry_requested(annotation: str | None, last_retry: str | None) -> bool:
    """A ``ferryman.dev/retry`` value the operator has not acted on yet."""
    return bool(annotation) and annotation != last_retry


def verify_requested(annotation: str | None, finished: bool, answered: str | None) -> bool:
    """A ``ferryman.dev/verify`` value to act on now: the run has finished, and its latest
    verification (``answered``: the value it answers; None: none) is not for this value."""
    return bool(annotation) and finished and annotation != answered


def answered(progress: RunProgress) -> str | None:
    """The ferryman.dev/verify value the run's latest verification answers (None: none)."""
    return None if progress.verification is None else progress.verification.request


def verify_pending(annotation: str | None, verification: dict[str, object] | None) -> bool:
    """Whether the run's status still waits on the ``ferryman.dev/verify`` value (asked for and
    not answered, or being worked on): such a finished run is refreshed like a live one."""
    if not annotation:
        return False
    if not verification or verification.get("request") != annotation:
        return True
    return verification.get("verdict") == "Pending"


def ttl_left(
    ttl_seconds: int | None, finished_at: datetime.datetime | None, now: datetime.datetime
) -> float | None:
    """Seconds until a finished run is to be deleted (0 or less: now); None: never."""
    if ttl_seconds is None or finished_at is None:
        return None
    return (finished_at + datetime.timedelta(seconds=ttl_seconds) - now).total_seconds()


def expires_in(body: Mapping[str, Any], now: datetime.datetime) -> float | None:
    """Seconds until the finished run ``body`` (its status says so) is to be deleted; None:
    not finished, or no TTL."""
    found = body.get("status") or {}
    finished = found.get("finishedAt") if found.get("state") in FINISHED else None
    ttl = (body.get("spec") or {}).get("ttlSecondsAfterFinished")
    if finished is None or ttl is None:
        return None
    at = datetime.datetime.fromisoformat(str(finished).replace("Z", "+00:00"))
    return ttl_left(int(ttl), at, now)
