"""What the operator asks of PostgreSQL about one run, on a thread (``Database.run``): a
reconcile's visit, and the cancel of a deleted run. A visit reads the run's aggregate, makes the
statements ``reconcile.visit`` decides (admit it, start it if its start was cut short, suspend,
resume, reopen, verify), reads it again, and returns what it found and met
(``reconcile.visit.Facts``). Nothing is decided here."""

from __future__ import annotations

import datetime

from ferryman_operator.reconcile import visit as decide
from ferryman_worker import contract


def visit(
    conn: contract.Connection,
    asked: decide.Asked,
    width: int,
    destinations: contract.DestinationPolicy,
    now: datetime.datetime,
) -> decide.Facts:
    """One visit of the run ``asked`` describes; ``width``: the migrations lane's, which sets
    its default in-flight limit at admission; ``destinations``: where its mapping may write."""
    key = contract.run_key(asked.run)
    found = contract.progress(conn, key)
    if not found:
        if decide.held(asked) is not None:
            return decide.Facts()
        refused = _admit(conn, asked, width, destinations)
        if refused is not None:
            return decide.Facts(refused=refused)
        found = contract.progress(conn, key)
    progress = found[0]
    if decide.cut_short(progress):
        contract.admit(conn, asked.run, width)
        progress = contract.progress(conn, key)[0]
    plan = decide.plan(asked, progress)
    reopen_refused = _act(conn, key, plan, asked.credential)
    after = contract.progress(conn, key)[0] if plan.reread else progress
    running = after.state is contract.RunState.RUNNING
    return decide.Facts(
        progress=after,
        found=progress,
        reopen_refused=reopen_refused,
        retrying=contract.retrying(conn, after.id, now) if running else None,
        eta=contract.eta(conn, after.id) if running else None,
    )


def _admit(
    conn: contract.Connection,
    asked: decide.Asked,
    width: int,
    destinations: contract.DestinationPolicy,
) -> contract.FerrymanError | None:
    """Admit the run; the database's refusal, if it refused (None: admitted)."""
    try:
        contract.admit(
            conn,
            asked.run,
            width,
            mapping=asked.definitions.mapping,
            sealed=asked.credential,
            provider_definition=asked.definitions.provider,
            destinations=destinations,
        )
    except (contract.WorkspaceOwned, contract.AdmissionRefused, contract.ConfigurationError) as exc:
        return exc
    return None


def _act(
    conn: contract.Connection, key: str, plan: decide.Plan, sealed: contract.Sealed | None
) -> str | None:
    """Make the statements of ``plan``; why the failed run was not reopened, if it was not."""
    if plan.suspension == "suspend":
        contract.suspend(conn, key)
    elif plan.suspension == "resume":
        contract.resume(conn, key)
    refused = None
    if plan.reopen:
        try:
            contract.retry(conn, key, sealed=sealed)
        except contract.AdmissionRefused as exc:
            refused = str(exc)
    if plan.verify is not None:
        contract.verify(conn, key, plan.verify)  # a worker's verification job does it
    return refused


def cancel(conn: contract.Connection, key: str) -> bool:
    """Cancel the run ``key`` if it is live, and forget its name (a new MigrationRun of this
    name is a new run); whether it was cancelled."""
    found = contract.progress(conn, key)
    live = bool(found) and found[0].state is contract.RunState.RUNNING
    cancelled = live and contract.cancel(conn, key)
    contract.forget(conn, key)
    return cancelled
