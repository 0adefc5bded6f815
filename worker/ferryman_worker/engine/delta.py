"""Delta runs: the cutover's catch-up pass.

A run with ``spec.mode: Delta`` starts, per kind, from when the workspace's latest successful
run that imported the kind started (decided at admission and kept in the run's options, so a
retried or resumed delta asks the same question). A kind whose provider declares
``changedSince`` is listed with that filter; another is listed whole. Either way each record's
source version (its version field, or a hash of the record) is compared in the window's
statement with the version the ledger holds: unchanged and older records are skipped, newer
ones update the row the ledger names, unknown ones are inserted (see
``destinations.generate``).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import Kind

DELTA = "delta"


def is_delta(run: Mapping[str, Any]) -> bool:
    """Whether ``run`` (its row, or its options) is a delta run."""
    options = run.get("options", run)
    return bool(options.get("mode") == DELTA)


def starting_points(conn: Connection, workspace: str, kinds: list[str]) -> dict[str, str | None]:
    """Each kind's starting point (ISO 8601; None: no successful run imported the kind, so it
    is read whole). ConfigurationError when the workspace has no successful run at all: a
    delta catches up on a full run, it does not replace one."""
    rows = conn.execute(
        queries.engine("delta_since"), {"workspace": workspace, "kinds": kinds}
    ).fetchall()
    found = {row["kind"]: row["since"] for row in rows}
    if not any(found.values()):
        raise ConfigurationError(
            f"spec.mode: Delta reads what changed since the workspace's last successful run,"
            f" and workspace {workspace!r} has none that imported {sorted(kinds)}: run it"
            " with mode Full first (or leave mode out)"
        )
    return {kind: None if at is None else at.isoformat() for kind, at in found.items()}


def since(run: Mapping[str, Any], kind: str) -> datetime.datetime | None:
    """Where ``kind``'s delta starts in ``run``; None for a full run, or a kind read whole."""
    if not is_delta(run):
        return None
    text = (run["options"].get("since") or {}).get(kind)
    return None if text is None else datetime.datetime.fromisoformat(text)


def tombstones(
    run: Mapping[str, Any], kind: Kind, records: list[dict[str, Any]]
) -> tuple[list[str], list[dict[str, Any]]]:
    """The source ids of the records a delta's listing marks deleted (``changedSince.deleted``),
    and the other records; in a full run, or for a kind whose listing reports no deletions,
    none and all of them."""
    field = kind.changed_since.deleted if kind.changed_since else ""
    if not field or not is_delta(run):
        return [], records
    gone = [str(r.get(kind.id)) for r in records if r.get(field) is True]
    if not gone:
        return [], records
    return gone, [r for r in records if r.get(field) is not True]


def renewed_parents(
    conn: Connection, run: Mapping[str, Any], kind: Kind, parents: list[str]
) -> set[str]:
    """Of a tree kind's ``parents``, those this delta run wrote (new, or updated because they
    changed): each of their children is read again, body and all, and written through the
    version comparison, so a change under a changed parent is applied. Empty in a full run."""
    if kind.parent is None or not is_delta(run) or not parents:
        return set()
    rows = conn.execute(
        queries.engine("delta_renewed_parents"),
        {
            "workspace": run["workspace"],
            "kind": kind.parent,
            "source_ids": parents,
            "run_id": run["id"],
        },
    ).fetchall()
    return {row["source_id"] for row in rows}


def listing_params(run: Mapping[str, Any], kind: Kind) -> dict[str, str]:
    """The query parameters asking ``kind``'s listing for what changed in this delta run;
    empty for a full run, or a kind without ``changedSince``, or one read whole."""
    at = since(run, kind.name)
    if at is None or kind.changed_since is None:
        return {}
    return kind.changed_since.params(at)
