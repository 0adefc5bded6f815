"""A reconcile's visit of the database (``ferryman_operator.statements``) on a real PostgreSQL,
without a cluster: it makes the statements ``reconcile.visit`` decides and returns the facts it
found, and a run held back leaves no row."""

from __future__ import annotations

import copy
import datetime
from typing import Any

from tests.unit.test_runspec import VALID

from ferryman_operator import statements
from ferryman_operator.reconcile import visit
from ferryman_operator.reconcile.admission import Candidate
from ferryman_operator.reconcile.conditions import Wanted
from ferryman_worker import contract
from ferryman_worker.contract import RunState
from ferryman_worker.db import connect

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
WORKERS = Wanted("WorkersReady", "True", "PoolSpecApplied", "fits")
OLDER = Candidate("2026-12-01T11:00:00Z", "ns/older", "acme", "Queued")


def asked(name: str = "acme-crm", ahead: Candidate | None = None, **spec: Any) -> visit.Asked:
    body = copy.deepcopy(VALID)
    body["metadata"].update(namespace="ns", name=name)
    body["spec"].update(spec)
    run = contract.parse_run(body, source=f"ns/{name}")
    return visit.Asked(run, {}, WORKERS, ahead=ahead)


def visited(conn: connect.Connection, asking: visit.Asked) -> visit.Facts:
    return statements.visit(conn, asking, 2, contract.DestinationPolicy(), NOW)


def test_a_run_first_in_line_is_admitted_and_started_and_read_back(
    conn: connect.Connection,
) -> None:
    facts = visited(conn, asked())
    assert facts.progress is not None and facts.progress.state is RunState.RUNNING
    assert facts.progress.tasks_total > 0 and facts.found == facts.progress
    assert facts.refused is None and facts.eta is not None
    assert contract.progress(conn, "ns/acme-crm")[0].id == facts.progress.id


def test_a_run_held_back_leaves_no_row(conn: connect.Connection) -> None:
    assert visited(conn, asked(ahead=OLDER)) == visit.Facts()
    assert contract.progress(conn, "ns/acme-crm") == []


def test_the_database_refuses_a_second_live_run_of_a_workspace(conn: connect.Connection) -> None:
    visited(conn, asked())
    facts = visited(conn, asked("acme-crm-2"))
    assert isinstance(facts.refused, contract.AdmissionRefused)
    assert facts.refused.live_run == "ns/acme-crm" and facts.progress is None
    assert contract.progress(conn, "ns/acme-crm-2") == []


def test_a_visit_suspends_and_resumes_the_run_as_its_spec_says(conn: connect.Connection) -> None:
    visited(conn, asked())
    suspended = visited(conn, asked(suspend=True))
    assert suspended.found is not None and not suspended.found.suspended
    assert suspended.progress is not None and suspended.progress.suspended
    resumed = visited(conn, asked())
    assert resumed.progress is not None and not resumed.progress.suspended


def test_a_deleted_run_is_cancelled_once_and_its_name_freed(conn: connect.Connection) -> None:
    visited(conn, asked())
    assert statements.cancel(conn, "ns/acme-crm")
    assert contract.progress(conn, "ns/acme-crm") == []  # a new run may take the name
    assert not statements.cancel(conn, "ns/acme-crm")
