"""A finished run verified: each kind's ids listed again from the source and compared with the
workspace's ledger (``verification`` asks for it and reads the result).

The listing goes through the engine's own paths: the run's provider definition as admitted, its
credential (sealed, or ``ferryman run``'s), the client that guards the credential's bindings and
the installation's allow-list, the pagination with its stop rules and loop guard, and the
credential's rate budget (``calls``: tokens reserved before every round, 429s pausing every
worker). It is as cheap as the provider allows: the largest page the kind serves, and a kind's
``verifyQuery`` (e.g. ``{fields: id}``) when its provider declares one, so the source sends the
ids alone. Nothing is written but the ids listed (``ferryman_verify_listed``, emptied at the end)
and each kind's result.

A tree kind is verified per parent: the children of every parent the verification itself listed
(its parent kind is verified first), their listings only (a child's id is in its listing; no
body is fetched). A parent the source no longer has lists no children: its children in the
ledger are gone. Missing ids the run recorded as row errors (malformed, refused) are not
missing: the run said so (``ferryman errors``).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import AliasPath, BaseModel, ValidationError

from ferryman_worker import providers
from ferryman_worker.db import queries, sqlstate
from ferryman_worker.db.connect import Connection
from ferryman_worker.engine import calls, paging, verification
from ferryman_worker.engine.runtime import RESOURCE, EngineRuntime
from ferryman_worker.engine.source import Retry, SourceError
from ferryman_worker.errors import CredentialRefused, FerrymanError
from ferryman_worker.providers import Kind, Provider, Reply, Request
from ferryman_worker.queue import JobContext, Unretryable, job

log = logging.getLogger("ferryman.engine.verify")

Pool = concurrent.futures.ThreadPoolExecutor


@job(
    verification.VERIFY_JOB,
    queue=verification.VERIFY_OPTIONS.queue,
    max_attempts=verification.VERIFY_OPTIONS.max_attempts,
    pass_context=True,
)
def verify_run(ctx: JobContext, run_id: int) -> None:
    """Verify run ``run_id``, if a verification of it is queued or was cut short."""
    runtime = ctx.resources.get(RESOURCE) or EngineRuntime()
    try:
        run(ctx.conn, run_id, runtime)
    except Exception as exc:
        hopeless = _hopeless(exc)
        if hopeless or ctx.job.is_last_attempt:
            fail(ctx.conn, run_id, exc)
        if hopeless:
            raise Unretryable(f"{exc} (retrying cannot help)") from exc
        raise


def run(
    conn: Connection, run_id: int, runtime: EngineRuntime, retry: Retry | None = None
) -> list[verification.KindCheck] | None:
    """Verify the run, kind by kind in phase order, keeping each kind's result; None when no
    verification of it is queued or running."""
    started = verification.query("start_verification")
    if conn.execute(started, {"run_id": run_id}).fetchone() is None:
        return None
    row = conn.execute(queries.engine("run_for_task"), {"run_id": run_id}).fetchone()
    assert row is not None
    lister = Lister.build(conn, row, runtime, retry or Retry())
    found = []
    try:
        for phase in row["phases"]:
            for name in phase:
                found.append(lister.verify(lister.provider.kinds[name]))
    finally:
        conn.execute(verification.query("forget_run_listed"), {"run_id": run_id})
    conn.execute(
        verification.query("finish_verification"),
        {"run_id": run_id, "state": "done", "error": None},
    )
    return found


def fail(conn: Connection, run_id: int, exc: Exception) -> None:
    """The verification failed for good: its error kept, what it listed dropped."""
    error = f"{type(exc).__name__}: {exc}"[:2000]
    conn.execute(verification.query("forget_run_listed"), {"run_id": run_id})
    conn.execute(
        verification.query("finish_verification"),
        {"run_id": run_id, "state": "failed", "error": error},
    )


def _hopeless(exc: Exception) -> bool:
    if isinstance(exc, SourceError):
        return not exc.retryable
    return isinstance(exc, CredentialRefused | FerrymanError) or sqlstate.permanent(exc)


@dataclasses.dataclass
class Lister:
    """The run's source, listed again for its ids, kind by kind."""

    conn: Connection
    run: dict[str, Any]
    provider: Provider
    caller: calls.Calls
    threads: int

    @classmethod
    def build(
        cls, conn: Connection, run: dict[str, Any], runtime: EngineRuntime, retry: Retry
    ) -> Lister:
        provider = providers.of_run(run)
        credential = runtime.credential(run, provider.auth)
        client = runtime.client(run["base_url"], credential, provider.auth)
        budget = runtime.budget(run["base_url"], credential, run["options"].get("rate_limit"))
        caller = calls.Calls(conn, client, budget, providers.ResponsePolicy(), retry)
        return cls(conn, run, provider, caller, int(run["options"].get("fetch_threads", 4)))

    def verify(self, kind: Kind) -> verification.KindCheck:
        """List ``kind``'s ids, compare them with the ledger, keep the result."""
        params = {"run_id": self.run["id"], "kind": kind.name}
        self.conn.execute(verification.query("forget_listed"), params)
        self.caller.policy = kind.policy
        if kind.walk == "tree":
            note = self._list_tree(kind)
        else:
            note = ""
            for part in range(len(kind.split.parts)):
                self._list_chain(kind, part)
        compared = self.conn.execute(
            verification.query("compare_kind"), {**params, "workspace": self.run["workspace"]}
        ).fetchone()
        assert compared is not None
        found = verification.KindCheck.of({**compared, "kind": kind.name, "note": note})
        self.conn.execute(
            verification.query("save_verified_kind"),
            {
                **params,
                "listed": found.listed,
                "missing": found.missing,
                "gone": found.gone,
                "missing_ids": list(found.missing_ids),
                "gone_ids": list(found.gone_ids),
                "note": found.note,
            },
        )
        log.info("verified %s", found.line())
        return found

    def _request(
        self, kind: Kind, at: paging.Position, parent: dict[str, Any] | None = None
    ) -> Request:
        """The listing's request at ``at``: the kind's largest page, the run's source options,
        no delta filter (the whole listing), and the provider's verify query unless the run's
        mapping keys the ledger by another field than the kind's id (it needs whole records)."""
        options = self.run["options"].get("source")
        base = paging.request(self.provider, kind, at, kind.max_page_size, parent, options)
        ids_only = kind.verify_query and self._pointer(kind) == kind.id_pointer
        return base.with_params(**kind.verify_query) if ids_only else base

    def _list_chain(self, kind: Kind, part: int) -> None:
        """Every page of one part's chain, one after the other; a token the source says is
        gone restarts the chain (what it listed again is kept once)."""
        at: paging.Position | None = paging.Position.start(kind, part)
        while at is not None:
            answer = self.caller.all([self._request(kind, at)], gone_ok=at.restartable(kind))[0]
            if isinstance(answer, SourceError):
                at = at.restarted(kind, answer)
                continue
            at = self._keep_page(kind, at, answer)

    def _keep_page(
        self, kind: Kind, at: paging.Position, reply: Reply, parent: str | None = None
    ) -> paging.Position | None:
        """Keep the ids of the page at ``at``; the position of the next page, or None."""
        records = self.provider.records(kind.name, reply)
        ids = [i for i in (record_id(kind, self._pointer(kind), r) for r in records) if i]
        self.conn.execute(
            verification.query("keep_listed"),
            {"run_id": self.run["id"], "kind": kind.name, "source_ids": ids},
        )
        return paging.following(kind, at, reply, records, kind.max_page_size)

    def _list_tree(self, kind: Kind) -> str:
        """The children of every parent the verification listed, ``threads`` parents side by
        side; the note says how many parents were listed and how many had gone."""
        rows = self.conn.execute(
            verification.query("listed_parents"), {"run_id": self.run["id"], "kind": kind.parent}
        ).fetchall()
        parents = [str(row["source_id"]) for row in rows]
        gone = 0
        with Pool(self.threads, thread_name_prefix="verify") as pool:
            for batch in _batches(parents, self.threads):
                gone += self._list_children(kind, batch, pool)
        return f"the children of {len(parents):,} {kind.parent} listed, {gone:,} of them gone"

    def _list_children(self, kind: Kind, parents: Sequence[str], pool: Pool) -> int:
        """The children listings of ``parents``, page after page; how many parents are gone."""
        at = {parent: paging.Position.start(kind) for parent in parents}
        pending, gone = list(parents), 0
        while pending:
            requests = [self._request(kind, at[p], {"id": p}) for p in pending]
            answers = self.caller.all(requests, pool.map, gone_ok=True)
            more = []
            for parent, reply in zip(pending, answers, strict=True):
                if isinstance(reply, SourceError):  # the parent is gone, its children with it
                    gone += 1
                    continue
                following = self._keep_page(kind, at[parent], reply, parent)
                if following is not None:
                    at[parent] = following
                    more.append(parent)
            pending = more
        return gone

    def _pointer(self, kind: Kind) -> str:
        """The pointer the ledger keys ``kind``'s records by: the run's mapping's sourceId,
        else the provider's declared id."""
        snapshot = self.run.get("mapping") or {}
        mapped = ((snapshot.get("mapping") or {}).get("kinds") or {}).get(kind.name) or {}
        return str(mapped.get("sourceId") or kind.id_pointer)


def record_id(kind: Kind, pointer: str, record: Any) -> str | None:
    """The source id the ledger keys ``record`` by: the kind's id field (where its provider
    reads it from, e.g. ``metadata.uid``), or, for a mapping's own ``sourceId``, that pointer
    in the record as its model reads it. None: it has none (the run recorded it as malformed)."""
    if not isinstance(record, dict):
        return None
    if pointer == kind.id_pointer:
        value = providers.dig(record, ".".join(_id_path(kind)))
    else:
        try:
            model: BaseModel = kind.model.model_validate(record)
        except ValidationError:
            return None
        value = _at(model.model_dump(mode="json"), pointer)
    return None if value is None or isinstance(value, dict | list) else str(value)


def _id_path(kind: Kind) -> list[str]:
    """Where a raw record holds the kind's id field."""
    info = kind.model.model_fields.get(kind.id)
    alias = None if info is None else (info.validation_alias or info.alias)
    if isinstance(alias, AliasPath):
        return [str(step) for step in alias.path]
    return [alias if isinstance(alias, str) else kind.id]


def _at(document: Any, pointer: str) -> Any:
    """The value at a JSON pointer (None: none)."""
    for token in pointer.split("/")[1:]:
        step = token.replace("~1", "/").replace("~0", "~")
        if isinstance(document, dict):
            document = document.get(step)
        elif isinstance(document, list) and step.isdigit() and int(step) < len(document):
            document = document[int(step)]
        else:
            return None
    return document


def _batches(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, max(1, size))):
        yield batch
