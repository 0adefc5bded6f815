"""A capped read of a kind's first pages, nothing written: what a provider author runs while
writing a provider (``ferryman provider sample``). The pages are fetched as a run would fetch
them (pagination, stop rules, loop guard, auth, response policy), the records validated by the
kind's model; malformed ones come with their reasons."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from ferryman_worker.engine import paging, windows
from ferryman_worker.engine.source import SourceClient, SourceError
from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import Provider


@dataclasses.dataclass
class SampledPage:
    number: int
    token: Any
    records: list[dict[str, Any]]
    valid: list[dict[str, Any]]
    malformed: windows.Malformed
    ended: str | None
    """Why the listing ends after this page (None: it goes on)."""


def sample(
    provider: Provider,
    kind_name: str,
    client: SourceClient,
    *,
    pages: int = 2,
    page_size: int = 20,
    parent: Mapping[str, Any] | None = None,
) -> Iterator[SampledPage]:
    """Up to ``pages`` pages of ``kind_name`` (of ``parent``'s children for a tree kind)."""
    if kind_name not in provider.kinds:
        raise ConfigurationError(
            f"--kind: {provider.name!r} has no kind {kind_name!r}; it has {sorted(provider.kinds)}"
        )
    kind = provider.kinds[kind_name]
    if kind.walk == "tree" and parent is None:
        raise ConfigurationError(
            f"--parent: {kind_name!r} is listed per {kind.parent!r} record: give a parent id"
        )
    size = min(page_size, kind.max_page_size)
    at: paging.Position | None = paging.Position.start(kind)
    for number in range(1, pages + 1):
        if at is None:
            return
        reply = client.call(paging.request(provider, kind, at, size, parent), kind.policy)
        records = provider.records(kind_name, reply)
        gone: windows.Malformed = []
        if kind.walk == "tree":
            records = _with_bodies(provider, kind_name, client, records, gone)
        valid, malformed = windows.validate(kind, records)
        malformed += gone
        following = paging.following(kind, at, reply, records, size)
        ended = None
        if following is None:
            stop = kind.pagination.stop(at.token, reply, records, size, at.page)
            ended = stop or "the last page"
        yield SampledPage(
            number,
            at.token,
            records,
            [model.model_dump(mode="json") for model in valid],
            malformed,
            ended,
        )
        at = following


def _with_bodies(
    provider: Provider,
    kind: str,
    client: SourceClient,
    records: list[dict[str, Any]],
    gone: windows.Malformed,
) -> list[dict[str, Any]]:
    """The records with their bodies; one whose body is gone is added to ``gone``, as a walk
    records it."""
    found = []
    for record in records:
        request = provider.body(kind, record)
        if request is None:
            found.append(record)
            continue
        try:
            body = client.call(request, provider.kinds[kind].policy).body
        except SourceError as exc:
            if not exc.gone:
                raise
            reason = f"gone from the source before its body was fetched: {exc}"
            gone.append((str(record.get("id")), reason))
            continue
        found.append(provider.merge_body(kind, record, body))
    return found
