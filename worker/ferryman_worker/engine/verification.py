"""A finished run's verification, as it is asked for and read: the source's ids of each kind
listed again and compared with the workspace's ledger (``verify`` does the work, as a queue job
or in ``ferryman verify``'s own process).

Asking (``request``) queues the job in the asker's transaction; asking again while one is queued
or running takes its place (the job finds the newer request). What a verification found is read
with the run's progress (``engine.sql``'s ``run_progress``: its ``verification``) into
``Verification``, which ``ferryman status``, the report and the MigrationRun's status show.

A finished verification is the strongest word on a kind (``judged``): a kind whose every listed
id is in the ledger is ``verified``, one with ids the ledger lacks is ``short`` by their count.
Ids the ledger holds that the source no longer lists (``gone``: deleted at the source since) do
not make the import short; they are named in the note. Nothing here calls a source.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.engine import reconcile, schedule
from ferryman_worker.errors import FerrymanError
from ferryman_worker.queue import JobCall, JobOptions, enqueue

VERIFY_JOB = "ferryman.verify"
"""The queue job that verifies one run; its one argument is the run's id."""
VERIFY_OPTIONS = JobOptions(queue=schedule.LANE, max_attempts=10)
"""The verification job's options: in the lane the run's tasks use (its workers hold the
run's credential), tried again after a crash or a source's outage."""
FIRST_IDS = 10
"""How many of the missing and of the gone ids a kind's result names."""

State = Literal["queued", "running", "done", "failed"]
Verdict = Literal["verified", "differs", "pending", "failed"]


def query(name: str) -> Any:
    """The verification's query called ``name`` (``sql/verify.sql``)."""
    return queries.get(name, "verify.sql")


@dataclasses.dataclass(frozen=True)
class KindCheck:
    """One kind, compared: ids the source ``listed``, ``missing`` from the ledger (the source
    lists them, the import lacks them: no row error of the run explains them), ``gone`` from the
    source (the ledger holds them, the source no longer lists them), and the first ids of each."""

    kind: str
    listed: int
    missing: int
    gone: int
    missing_ids: tuple[str, ...]
    gone_ids: tuple[str, ...]
    note: str

    @property
    def verdict(self) -> Literal["verified", "differs"]:
        return "verified" if not self.missing and not self.gone else "differs"

    def line(self) -> str:
        """``deals: verified: 1,200 listed, 0 missing, 0 gone`` and the first ids of each."""
        text = (
            f"{self.kind}: {self.verdict}: {self.listed:,} listed, {self.missing:,} missing,"
            f" {self.gone:,} gone"
        )
        if self.missing_ids:
            text += f"; missing {_first(self.missing_ids, self.missing)}"
        if self.gone_ids:
            text += f"; gone {_first(self.gone_ids, self.gone)}"
        return f"{text} ({self.note})" if self.note else text

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> KindCheck:
        return cls(
            str(row["kind"]),
            int(row["listed"]),
            int(row["missing"]),
            int(row["gone"]),
            tuple(row["missing_ids"] or ()),
            tuple(row["gone_ids"] or ()),
            str(row.get("note") or ""),
        )


@dataclasses.dataclass(frozen=True)
class Verification:
    """A run's latest verification: who asked (``request``: the annotation's value, or
    ``cli``), where it stands, why it failed, and each kind compared so far (``kinds``)."""

    request: str
    state: State
    error: str | None
    requested_at: datetime.datetime | None
    finished_at: datetime.datetime | None
    kinds: tuple[KindCheck, ...] = ()

    @property
    def verdict(self) -> Verdict:
        """The run's: ``verified`` (every kind lists what the ledger holds), ``differs`` (some
        kind has missing or gone ids), ``pending`` (queued or running) or ``failed``."""
        if self.state in ("queued", "running"):
            return "pending"
        if self.state == "failed":
            return "failed"
        return "verified" if all(k.verdict == "verified" for k in self.kinds) else "differs"

    @property
    def missing(self) -> int:
        return sum(kind.missing for kind in self.kinds)

    @property
    def gone(self) -> int:
        return sum(kind.gone for kind in self.kinds)

    def line(self) -> str:
        """The run's verdict in a line, e.g. ``verified: 3 kind(s), 0 missing, 0 gone``."""
        if self.verdict == "pending":
            return f"pending: {self.state} (asked for by {self.request})"
        if self.verdict == "failed":
            return f"failed: {self.error}"
        return (
            f"{self.verdict}: {len(self.kinds)} kind(s), {self.missing:,} missing,"
            f" {self.gone:,} gone"
        )

    @classmethod
    def of(cls, found: Mapping[str, Any] | None) -> Verification | None:
        """From ``run_progress``'s ``verification`` (None: none was asked for)."""
        if not found:
            return None
        return cls(
            str(found["request"]),
            found["state"],
            found.get("error"),
            _time(found.get("requested_at")),
            _time(found.get("finished_at")),
            tuple(KindCheck.of(kind) for kind in found.get("kinds") or ()),
        )


def judged(
    verdicts: Sequence[reconcile.Verdict], found: Verification | None
) -> tuple[reconcile.Verdict, ...]:
    """The kinds' ``verdicts`` with the verification ``found`` applied, once it is done: a kind
    ``reconciled`` or ``unverified`` whose every listed id is in the ledger becomes
    ``verified``; a kind with missing ids becomes ``short`` by their count (a ``refused`` kind
    stays refused, its note naming them). A verification queued, running or failed, or a kind
    it did not compare, leaves the verdict as the run's barrier gave it."""
    if found is None or found.state != "done":
        return tuple(verdicts)
    checks = {check.kind: check for check in found.kinds}
    return tuple(_judged(verdict, checks.get(verdict.kind)) for verdict in verdicts)


def _judged(verdict: reconcile.Verdict, check: KindCheck | None) -> reconcile.Verdict:
    if check is None:
        return verdict
    gone = (
        f"; {check.gone:,} id(s) of the ledger are gone from the source since:"
        f" {_first(check.gone_ids, check.gone)}"
        if check.gone
        else ""
    )
    if check.missing:
        note = (
            f"a verification found {check.missing:,} id(s) the source lists that the ledger"
            f" lacks: {_first(check.missing_ids, check.missing)}{gone}"
        )
        if verdict.verdict == "refused":
            return dataclasses.replace(verdict, note=f"{verdict.note}; {note}")
        return dataclasses.replace(verdict, verdict="short", short_by=check.missing, note=note)
    if verdict.verdict not in ("reconciled", "unverified"):
        return verdict
    note = f"a verification listed {check.listed:,} id(s) of the source, each in the ledger{gone}"
    return dataclasses.replace(verdict, verdict="verified", note=note)


def verify_call(run_id: int) -> JobCall:
    """The verification job of ``run_id``, ready to enqueue: one of the run's verification
    jobs runs at a time (asked for twice, the second waits, then finds nothing queued or the
    newer request)."""
    options = dataclasses.replace(VERIFY_OPTIONS, concurrency_key=f"{VERIFY_JOB}:{run_id}")
    return JobCall(VERIFY_JOB, (run_id,), {}, options)


def request(conn: Connection, run_id: int, asker: str, *, queue: bool = True) -> None:
    """Ask for the run's verification: queued, with its job (``queue``; False: the caller runs
    it itself, ``verify.run``) in one transaction. FerrymanError while the run runs: a
    verification compares what a finished run wrote."""
    with conn.transaction():
        row = conn.execute(
            query("request_verification"), {"run_id": run_id, "request": asker}
        ).fetchone()
        if row is None:
            raise FerrymanError(
                f"run {run_id} is still running (or does not exist): a verification compares"
                " what a finished run wrote; ask again once it has finished"
            )
        if queue:
            enqueue(verify_call(run_id), conn=conn)


def read(conn: Connection, run_id: int) -> Verification | None:
    """The run's latest verification (None: none was asked for)."""
    rows = conn.execute(queries.engine("run_progress"), {"run_id": run_id, "names": None})
    row = rows.fetchone()
    return None if row is None else Verification.of(row["verification"])


def _first(ids: tuple[str, ...], count: int) -> str:
    shown = ", ".join(ids)
    return f"{shown}, ..." if count > len(ids) else shown


def _time(value: Any) -> datetime.datetime | None:
    if value is None or isinstance(value, datetime.datetime):
        return value
    return datetime.datetime.fromisoformat(str(value))
