"""Ground truth: every id per kind and which records are malformed, for tests to check against.

Computed from digests alone (records are not built), about a microsecond per record, so the
benchmark's 400,000 organizations take well under a second. Served by ``GET /_truth`` and
printed by ``python hack/democrm truth``; both produce the same JSON.
"""

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from democrm import data


def ground_truth(
    source: data.Source,
    *,
    with_ids: bool = True,
    deleted: Mapping[str, Collection[int]] | None = None,
) -> dict[str, Any]:
    """``{"dataset": {...}, "<kind>": {"count", "ids", "malformed"}}`` for the four kinds; deals
    also have ``gone``, the ids of deals deleted after their listing (``gone_deal_rate``).
    ``deleted``: record indices per kind deleted while serving (``POST /_drift``)."""
    truth: dict[str, Any] = {"dataset": dataclasses.asdict(source.dataset)}
    for kind in data.LISTED:
        indices: Iterable[int] = range(source.count(kind))
        removed = set((deleted or {}).get(kind, ()))
        if removed:
            indices = (i for i in indices if i not in removed)
        truth[kind] = kind_truth(source, kind, indices, with_ids)
    truth["messages"] = kind_truth(source, "messages", source.message_indices(), with_ids)
    gone = [i + 1 for i in range(source.count("deals")) if source.deal_gone(i)]
    truth["deals"]["gone"] = gone  # listed, then deleted: their messages are not in the truth
    return truth


def kind_truth(
    source: data.Source, kind: str, indices: Iterable[int], with_ids: bool
) -> dict[str, Any]:
    ids = [index + 1 for index in indices]
    malformed: dict[str, str] = {}
    if source.dataset.malformed_rate > 0:
        for record_id in ids:
            why = source.defect(kind, record_id - 1)
            if why is not None:
                malformed[str(record_id)] = why
    result: dict[str, Any] = {"count": len(ids), "ids": ids, "malformed": malformed}
    if not with_ids:
        del result["ids"]
    return result
