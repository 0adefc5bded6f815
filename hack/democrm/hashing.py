"""Deterministic bytes per record: BLAKE2b of (seed, kind, index), and small readers over them.

Every field of a record, its defect and (for deals) its message count come from one 64-byte digest,
so any record can be produced alone, in any order, from any thread, with nothing cached.
"""

import hashlib
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class Hasher:
    """One keyed prefix per kind; ``digest(kind, index)`` costs about half a microsecond."""

    def __init__(self, seed: int, kinds: Sequence[str]) -> None:
        self._prefixes = {
            kind: hashlib.blake2b(f"{seed}:{kind}:".encode(), digest_size=64) for kind in kinds
        }

    def digest(self, kind: str, index: int) -> bytes:
        h = self._prefixes[kind].copy()
        h.update(index.to_bytes(8, "little"))
        return h.digest()


def u32(h: bytes, at: int) -> int:
    """The unsigned 32-bit integer at byte offset ``at``."""
    return int.from_bytes(h[at : at + 4], "little")


def pick(options: Sequence[T], byte: int) -> T:
    return options[byte % len(options)]
