"""Malformed records: which records are damaged, how, and the damage itself.

A record is malformed when the first four bytes of its digest fall under ``malformed_rate``; byte 4
then picks one of its kind's defects, each tied to one field of the kind. The reason string,
``"<defect>:<field>"`` (e.g. ``"missing:name"``), is what ``/_truth`` reports. The record's ``id``
is never damaged, so a consumer can record the row error against its source id.

Messages have a fourth defect, ``gone:body``: the header is listed intact, but the body answers 404,
as if the message was deleted between its listing and the fetch of its body.
"""

import zlib
from typing import Any

from democrm import hashing

MISSING = "missing"
WRONG_TYPE = "wrong_type"
TOO_LONG = "too_long"
GONE = "gone"
DEFECTS = (MISSING, WRONG_TYPE, TOO_LONG, GONE)

MAX_STRING = 255
"""Longest valid string field (names, titles, subjects); a too-long defect exceeds it."""

FIELDS: dict[str, tuple[str, ...]] = {
    "organizations": ("name", "name", "name"),
    "people": ("name", "org_id", "name"),
    "deals": ("title", "value", "title"),
    "messages": ("subject", "subject", "subject", "body"),
}
"""Per kind, the field each defect (in ``DEFECTS`` order) damages; a kind has the first
``len(FIELDS[kind])`` defects."""


def reason(kind: str, h: bytes, rate: float) -> str | None:
    """The defect of the record with digest ``h``, or None if it is well-formed."""
    if rate <= 0 or hashing.u32(h, 0) >= rate * 2**32:
        return None
    choice = h[4] % len(FIELDS[kind])
    return f"{DEFECTS[choice]}:{FIELDS[kind][choice]}"


def apply(kind: str, record: dict[str, Any], h: bytes, rate: float) -> dict[str, Any]:
    """``record``, damaged in place when its digest says it is malformed."""
    why = reason(kind, h, rate)
    if why is not None:
        defect, field = why.split(":")
        damage(record, defect, field, h)
    return record


def damage(record: dict[str, Any], defect: str, field: str, h: bytes) -> None:
    if defect == GONE:
        return  # the listing is intact; the body answers 404
    if defect == MISSING:
        del record[field]
    elif defect == TOO_LONG:
        record[field] = stretch(str(record[field]), MAX_STRING + 45 + h[5] % 100)
    else:
        record[field] = wrong_type(record[field])


def stretch(text: str, length: int) -> str:
    """``text`` repeated to exactly ``length`` characters (300..399 for a too-long defect)."""
    return ((text + " ") * (length // (len(text) + 1) + 1))[:length]


def wrong_type(value: object) -> object:
    """A value no strict schema accepts: a string becomes an integer, a number a string."""
    if isinstance(value, str):
        return zlib.crc32(value.encode())
    if isinstance(value, float):
        return f"{round(value / 1000)}k"
    return f"ref-{value}"
