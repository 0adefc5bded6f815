"""The CRM-shaped data every source server is seeded with, generated deterministically from a seed.

organizations -> people -> deals -> notes is a tree: each person belongs to one organization, each
deal to one person (its contact), each note to one deal. Child counts vary per parent (drawn from
the seed), so a walk cannot assume fixed fan-outs. The same seed and scale always give the same
records in the same order; servers differ only in how they spell ids (see `Record.seq`).
"""

from __future__ import annotations

import dataclasses
import datetime
import random
from collections.abc import Iterator
from typing import Any

COLLECTIONS = ("organizations", "people", "deals", "notes")
PARENT = {"people": "organizations", "deals": "people", "notes": "deals"}
PARENT_FIELD = {"people": "organization", "deals": "person", "notes": "deal"}
DEFAULT_SEED = 1
DEFAULT_ORGANIZATIONS = 2000  # about 57,000 records in all with the fan-outs below

FAN_OUT = {"people": (3, 7), "deals": (0, 3), "notes": (1, 3)}  # children per parent, inclusive

ADJECTIVES = (
    "Blue", "Northern", "Silver", "Bright", "Quiet", "Rapid", "Golden", "Green", "Iron", "Clear",
    "Coastal", "Summit", "Urban", "Prime", "Solid", "Wild", "Zürich", "Ørsted",
)  # fmt: skip
NOUNS = (
    "Harbor", "Peak", "River", "Forge", "Field", "Bridge", "Stone", "Orchard", "Lantern", "Anchor",
    "Meadow", "Falcon", "Cedar", "Beacon", "Café", "Fjörd",
)  # fmt: skip
SUFFIXES = ("Ltd", "GmbH", "Inc", "LLC", "Group", "Partners", "Labs", "Systems")
INDUSTRIES = ("software", "logistics", "retail", "energy", "health", "media", "finance", "food")
FIRST_NAMES = (
    "Anna", "Ben", "Chloé", "David", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kara",
    "Liam", "Mei", "Noah", "Olga", "Pedro", "Søren", "Zoë",
)  # fmt: skip
LAST_NAMES = (
    "Smith", "Müller", "García", "Kowalski", "Nguyen", "Okafor", "Rossi", "Jensen", "Silva",
    "Tanaka", "Dubois", "Novak", "O'Brien", "Patel",
)  # fmt: skip
TITLES = ("CEO", "CTO", "Buyer", "Engineer", "Office manager", "Analyst", "Head of sales")
STAGES = ("lead", "qualified", "proposal", "won", "lost")
WORDS = (
    "call", "follow", "up", "pricing", "contract", "renewal", "demo", "budget", "quarter", "team",
    "signed", "pending", "review", "legal", "discount", "next", "week", "meeting", "über", "naïve",
)  # fmt: skip
EPOCH = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)


@dataclasses.dataclass(frozen=True)
class Record:
    """One record: `seq` numbers it within its collection from 1; `parent` is the parent's seq."""

    collection: str
    seq: int
    parent: int | None
    fields: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Dataset:
    seed: int
    organizations: int
    records: dict[str, list[Record]]

    def counts(self) -> dict[str, int]:
        return {name: len(self.records[name]) for name in COLLECTIONS}

    def total(self) -> int:
        return sum(self.counts().values())


def generate(seed: int = DEFAULT_SEED, organizations: int = DEFAULT_ORGANIZATIONS) -> Dataset:
    """Every record for `seed` at `organizations` organizations, parents before children."""
    if organizations < 1:
        raise ValueError(f"organizations must be at least 1 (got {organizations})")
    rng = random.Random(seed)
    records: dict[str, list[Record]] = {name: [] for name in COLLECTIONS}
    records["organizations"] = [organization(rng, seq) for seq in range(1, organizations + 1)]
    for child in COLLECTIONS[1:]:
        low, high = FAN_OUT[child]
        make = MAKERS[child]
        for parent in records[PARENT[child]]:
            for _ in range(rng.randint(low, high)):
                records[child].append(make(rng, len(records[child]) + 1, parent.seq))
    return Dataset(seed, organizations, records)


def moment(rng: random.Random) -> str:
    """A timestamp in 2020-2025 to the second, UTC, ISO 8601."""
    when = EPOCH + datetime.timedelta(seconds=rng.randrange(6 * 365 * 86400))
    return when.strftime("%Y-%m-%d %H:%M:%S.000Z")


def organization(rng: random.Random, seq: int) -> Record:
    name = f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} {rng.choice(SUFFIXES)}"
    fields = {
        "name": name,
        "domain": f"org{seq}.example.com",
        "industry": rng.choice(INDUSTRIES),
        "employees": rng.randint(1, 5000),
        "created_at": moment(rng),
    }
    return Record("organizations", seq, None, fields)


def person(rng: random.Random, seq: int, parent: int) -> Record:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    fields = {
        "first_name": first,
        "last_name": last,
        "email": f"person{seq}@org{parent}.example.com",
        "title": rng.choice(TITLES),
        "created_at": moment(rng),
    }
    return Record("people", seq, parent, fields)


def deal(rng: random.Random, seq: int, parent: int) -> Record:
    fields = {
        "title": f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} deal",
        "amount": rng.randint(100, 500_000),
        "stage": rng.choice(STAGES),
        "created_at": moment(rng),
    }
    return Record("deals", seq, parent, fields)


def note(rng: random.Random, seq: int, parent: int) -> Record:
    body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))
    return Record("notes", seq, parent, {"body": body, "created_at": moment(rng)})


MAKERS = {"people": person, "deals": deal, "notes": note}


def walk(dataset: Dataset) -> Iterator[Record]:
    """Every record, collection by collection, parents first."""
    for name in COLLECTIONS:
        yield from dataset.records[name]
