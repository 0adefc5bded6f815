"""The demo CRM's records, generated on demand from the seed: nothing is stored or cached.

Ids are ``index + 1`` for organizations, people and deals. A message's id encodes its deal and its
position, ``deal_index * stride + position + 1`` with ``stride = 2 * messages_per_deal + 1``, so a
body request can be answered from the id alone; message ids are therefore unique but not
contiguous. Digest bytes 0..5 belong to ``defects``; records read theirs from byte 8 on.
"""

import time
from collections.abc import Iterator
from typing import Any

from democrm import defects, hashing, words
from democrm.hashing import pick, u32
from democrm.settings import Dataset

Record = dict[str, Any]

KINDS = ("organizations", "people", "deals", "messages")
LISTED = ("organizations", "people", "deals")
"""Kinds with a top-level listing; messages are listed per deal."""

EPOCH = 1_420_070_400  # 2015-01-01T00:00:00Z
SPAN = 10 * 365 * 86_400


def iso(ts: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class Source:
    """Every record of one dataset, each computed from its own digest when asked for."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self.stride = 2 * dataset.messages_per_deal + 1
        self._hasher = hashing.Hasher(dataset.seed, KINDS)
        self._rate = dataset.malformed_rate

    def count(self, kind: str) -> int:
        """Size of a listed kind."""
        return int(getattr(self.dataset, kind))

    def digest(self, kind: str, index: int) -> bytes:
        return self._hasher.digest(kind, index)

    def defect(self, kind: str, index: int) -> str | None:
        """The defect reason of a record (see ``defects.reason``), or None."""
        if self._rate <= 0:
            return None
        return defects.reason(kind, self.digest(kind, index), self._rate)

    def listing(self, kind: str, start: int, limit: int) -> list[Record]:
        make = {"organizations": self.organization, "people": self.person, "deals": self.deal}
        return [make[kind](i) for i in range(start, min(start + limit, self.count(kind)))]

    def organization(self, index: int) -> Record:
        h = self.digest("organizations", index)
        name = f"{pick(words.ADJECTIVES, h[8])} {pick(words.NOUNS, h[9])}"
        record = {
            "id": index + 1,
            "name": f"{name} {pick(words.SUFFIXES, h[10])}",
            "domain": self._domain(index, h),
            "created_at": iso(EPOCH + u32(h, 12) % SPAN),
        }
        return defects.apply("organizations", record, h, self._rate)

    def person(self, index: int) -> Record:
        h = self.digest("people", index)
        org = self.person_org(index, h)
        first, last = pick(words.FIRST_NAMES, h[8]), pick(words.LAST_NAMES, h[9])
        local = f"{words.SLUGS[first]}.{words.SLUGS[last]}{index + 1}"
        phone = u32(h, 16) % 10_000_000
        record = {
            "id": index + 1,
            "org_id": org + 1,
            "name": f"{first} {last}",
            "email": f"{local}@{self._domain(org, self.digest('organizations', org))}",
            "phone": f"+1-555-{phone // 10_000:03d}-{phone % 10_000:04d}",
        }
        return defects.apply("people", record, h, self._rate)

    def person_org(self, index: int, h: bytes | None = None) -> int:
        """Index of the organization a person belongs to."""
        h = h if h is not None else self.digest("people", index)
        return u32(h, 12) % self.dataset.organizations

    def deal(self, index: int) -> Record:
        h = self.digest("deals", index)
        people = self._deal_people(h)
        org = self.person_org(people[0]) if people else u32(h, 12) % self.dataset.organizations
        stage = pick(words.STAGES, h[10])
        kind, product = pick(words.DEAL_KINDS, h[8]), pick(words.PRODUCTS, h[9])
        record = {
            "id": index + 1,
            "org_id": org + 1,
            "person_ids": [p + 1 for p in people],
            "title": f"{kind}: {product} (D-{index + 1})",
            "value": u32(h, 16) % 10_000_000 / 100,
            "currency": pick(words.CURRENCIES, h[11]),
            "stage": stage,
            "status": _status(stage, h[20]),
        }
        return defects.apply("deals", record, h, self._rate)

    def _deal_people(self, h: bytes) -> list[int]:
        """One to three distinct people, in a stable order; none when there are no people."""
        if not self.dataset.people:
            return []
        wanted = 1 + h[21] % 3
        chosen = (u32(h, 24 + 4 * k) % self.dataset.people for k in range(wanted))
        return list(dict.fromkeys(chosen))

    def message_count(self, deal_index: int) -> int:
        return u32(self.digest("deals", deal_index), 40) % self.stride

    def deal_gone(self, deal_index: int) -> bool:
        """Whether the deal was deleted after the deals listing (``gone_deal_rate``): its
        messages answer 404."""
        rate = self.dataset.gone_deal_rate
        return rate > 0 and u32(self.digest("deals", deal_index), 48) < rate * 2**32

    def messages(self, deal_index: int, start: int, limit: int) -> list[Record]:
        end = min(start + limit, self.message_count(deal_index))
        first = deal_index * self.stride
        return [self.message(first + j) for j in range(start, end)]

    def message(self, index: int) -> Record:
        """The header of the message with id ``index + 1``."""
        h = self.digest("messages", index)
        first, last = pick(words.FIRST_NAMES, h[8]), pick(words.LAST_NAMES, h[9])
        record = {
            "id": index + 1,
            "deal_id": index // self.stride + 1,
            "subject": pick(words.SUBJECTS, h[10]),
            "from": f"{words.SLUGS[first]}.{words.SLUGS[last]}@mail.example",
            "sent_at": iso(EPOCH + u32(h, 12) % SPAN),
        }
        return defects.apply("messages", record, h, self._rate)

    def message_exists(self, message_id: int) -> bool:
        deal_index, position = divmod(message_id - 1, self.stride)
        if message_id < 1 or deal_index >= self.dataset.deals or self.deal_gone(deal_index):
            return False
        return position < self.message_count(deal_index)

    def body_gone(self, message_id: int) -> bool:
        """Whether the message's body answers 404 (its defect is ``gone:body``)."""
        return (self.defect("messages", message_id - 1) or "").startswith(defects.GONE)

    def body(self, message_id: int) -> Record:
        """The body of an existing message (check ``message_exists`` first); never malformed."""
        h = self.digest("messages", message_id - 1)
        sentences = " ".join(pick(words.SENTENCES, h[32 + k]) for k in range(2 + h[30] % 9))
        sender = pick(words.FIRST_NAMES, h[8])
        text = f"Hi,\n\n{sentences}\n\n— {sender}"
        return {"id": message_id, "deal_id": (message_id - 1) // self.stride + 1, "body": text}

    def message_indices(self) -> Iterator[int]:
        """Indices (id - 1) of every message, deal by deal (none of a gone deal)."""
        for deal_index in range(self.dataset.deals):
            if self.deal_gone(deal_index):
                continue
            first = deal_index * self.stride
            yield from range(first, first + self.message_count(deal_index))

    def _domain(self, index: int, h: bytes) -> str:
        adjective, noun = pick(words.ADJECTIVES, h[8]), pick(words.NOUNS, h[9])
        return f"{words.SLUGS[adjective]}{words.SLUGS[noun]}{index + 1}.example"


def _status(stage: str, byte: int) -> str:
    if stage != "closed":
        return "open"
    return "won" if byte % 2 else "lost"
