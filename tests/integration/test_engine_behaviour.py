"""Engine behaviour: faults, fairness, suspend/resume/cancel, admission, the barrier."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import democrm_styles
import pytest
from migration import (
    barrier_held,
    check_against_truth,
    credential,
    engine_worker,
    ready_task_jobs,
    request,
    start_run,
    state,
    wait_finished,
)
from net import free_port, wait_for
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker import cli, contract
from ferryman_worker.db import connect, queries
from ferryman_worker.engine import phases, runs, schedule
from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import load as load_provider

MEDIUM: dict[str, Any] = {
    "organizations": 1500,
    "people": 500,
    "deals": 60,
    "messages_per_deal": 3,
    "malformed_rate": 0.02,
}


@pytest.mark.slow
@pytest.mark.parametrize("style", democrm_styles.STYLES)
def test_429s_5xx_and_timeouts_slow_the_run_but_lose_nothing(db_url: str, style: str) -> None:
    """In every pagination style; the 429s say Retry-After in seconds (offset) or as an HTTP
    date (the other styles)."""
    definition = democrm_styles.definition(style)
    with (
        DemoCRM.start(
            seed=11,
            budget_capacity=100,
            budget_refill_per_s=400,
            error_rate=0.08,
            stall_rate=0.01,
            stall_seconds=2,
            retry_after="seconds" if style == "offset" else "date",
            **MEDIUM,
        ) as crm,
        credential(crm.api_key),
        engine_worker(db_url, source_timeout=0.5),
    ):
        run_id = start_run(db_url, request(crm.url, page_size=100, provider_definition=definition))
        final = wait_finished(db_url, run_id, timeout=240)
        truth, stats = crm.truth(), crm.stats()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth)
    barrier_held(db_url, run_id)
    statuses = {status for calls in stats["requests"].values() for status in calls}
    assert {"429", "200"} <= statuses and statuses & {"500", "502", "503"}, stats


def test_two_runs_on_one_lane_progress_together(db_url: str) -> None:
    with (
        DemoCRM.start(
            seed=12, latency_ms=40, organizations=3000, people=0, deals=0, malformed_rate=0
        ) as crm,
        credential(crm.api_key),
        engine_worker(db_url, lanes="migrations:2"),
    ):
        first, second = (
            start_run(
                db_url,
                request(
                    crm.url,
                    name=name,
                    workspace=f"ws-{name}",
                    kinds=["organizations"],
                    page_size=100,
                    max_in_flight=2,
                ),
            )
            for name in ("a", "b")
        )
        wait_for(lambda: state(db_url, first)["rows_written"] >= 600, 60, "the first run")
        midway = state(db_url, second)
        assert midway["rows_written"] >= 300, "the second run starved"
        assert state(db_url, first)["state"] == "running"
        assert wait_finished(db_url, first)["state"] == "succeeded"
        assert wait_finished(db_url, second)["state"] == "succeeded"


def _stopped_midway(
    db_url: str, url: str, stop: Callable[[connect.Connection, int], bool], rows: int
) -> tuple[int, dict[str, Any]]:
    """A run started, then stopped by ``stop`` (it says it did) once it wrote ``rows`` rows: its
    tasks stopped and every task job ended (the queued ones exit at their claim). Returns the
    run's id and its state when its tasks had stopped."""
    run_id = start_run(db_url, request(url, page_size=50))
    wait_for(lambda: state(db_url, run_id)["rows_written"] > rows, 30, "progress")
    with connect.connect(db_url) as conn:
        assert stop(conn, run_id)
    wait_for(lambda: state(db_url, run_id)["tasks_running"] == 0, 10, "tasks to stop")
    stopped = state(db_url, run_id)
    wait_for(lambda: ready_task_jobs(db_url) == 0, 20, "the run's jobs to end")
    return run_id, stopped


def test_suspend_stops_at_a_window_boundary_and_resume_finishes(db_url: str) -> None:
    with (
        DemoCRM.start(seed=13, latency_ms=30, **MEDIUM) as crm,
        credential(crm.api_key),
        engine_worker(db_url, lanes="migrations:2"),
    ):
        run_id, paused = _stopped_midway(db_url, crm.url, runs.suspend, 200)
        assert state(db_url, run_id)["rows_written"] == paused["rows_written"]
        assert state(db_url, run_id)["tasks_waiting"] > 0  # work left, resumable
        assert state(db_url, run_id)["state"] == "running"
        with connect.connect(db_url) as conn:
            runs.resume(conn, run_id)
        final = wait_finished(db_url, run_id)
        truth = crm.truth()
    assert final["state"] == "succeeded", final["error"]
    check_against_truth(db_url, truth)


def test_cancel_stops_the_run_for_good(db_url: str) -> None:
    with (
        DemoCRM.start(seed=14, latency_ms=30, **MEDIUM) as crm,
        credential(crm.api_key),
        engine_worker(db_url, lanes="migrations:2"),
    ):
        run_id, final = _stopped_midway(db_url, crm.url, runs.cancel, 100)
    assert final["state"] == "cancelled"
    assert state(db_url, run_id)["rows_written"] == final["rows_written"]
    assert final["rows_written"] < 1500


def test_admission_allows_one_live_run_per_workspace_even_under_a_race(db_url: str) -> None:
    results: list[object] = []
    barrier = threading.Barrier(6)

    def admit(index: int) -> None:
        with connect.connect(db_url) as conn:
            barrier.wait()
            try:
                results.append(
                    runs.admit(conn, request("http://127.0.0.1:1", name=f"r{index}"))["name"]
                )
            except runs.AdmissionRefused as exc:
                results.append(exc)

    threads = [threading.Thread(target=admit, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    admitted = [r for r in results if isinstance(r, str)]
    refused = [r for r in results if isinstance(r, runs.AdmissionRefused)]
    assert len(admitted) == 1 and len(refused) == 5
    assert all(r.live_run == admitted[0] and "acme" in str(r) for r in refused)
    with connect.connect(db_url) as conn:  # once it ends, the workspace is free again
        live = runs.by_name(conn, admitted[0])
        assert live is not None
        runs.cancel(conn, int(live["id"]))
        assert runs.admit(conn, request("http://127.0.0.1:1", name="later"))["name"] == "later"


def test_admission_refuses_a_provider_whose_writer_function_is_missing(db_url: str) -> None:
    own_writers = {"provider": "democrm"}  # a mapping of no kind: the provider's functions
    with connect.connect(db_url) as conn:
        conn.execute("DROP FUNCTION democrm_write_people(jsonb, text, text, bigint)")
        with pytest.raises(ConfigurationError) as refused:
            runs.admit(
                conn, dataclasses.replace(request("http://127.0.0.1:1"), mapping=own_writers)
            )
        assert "democrm_write_people" in str(refused.value)
        assert "ferryman db migrate" in str(refused.value)
        assert runs.progress(conn) == []  # nothing admitted
        run = runs.admit(conn, request("http://127.0.0.1:1", kinds=["organizations"]))
        assert run["kinds"] == ["organizations"]  # a run that does not need it is admitted


def test_admission_refuses_a_mapping_that_does_not_fit_the_database(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        conn.execute("ALTER TABLE crm_messages RENAME COLUMN sender TO sent_by")
        with pytest.raises(ConfigurationError) as refused:
            runs.admit(conn, request("http://127.0.0.1:1"))
        assert "kinds.messages.columns.sender: crm_messages has no column sender" in str(
            refused.value
        )
        assert runs.progress(conn) == []  # nothing admitted
        run = runs.admit(conn, request("http://127.0.0.1:1", kinds=["organizations"]))
        assert run["mapping"]["catalog"]["organizations"]["sequence"] == (
            "public.crm_organizations_id_seq"
        )


def test_concurrent_barrier_attempts_have_one_winner(db_url: str) -> None:
    provider = load_provider("democrm")
    with connect.connect(db_url) as conn:
        run = runs.admit(conn, request("http://127.0.0.1:1"))
        with conn.transaction():
            phases.seed_phase(conn, runs.lock(conn, run["id"]), provider, 0)
        conn.execute("UPDATE ferryman_tasks SET status = 'done'")
    barrier = threading.Barrier(8)

    def attempt() -> None:
        with connect.connect(db_url) as c:
            barrier.wait()
            with c.transaction():
                phases.close_if_done(c, runs.lock(c, run["id"]), provider)

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with connect.connect(db_url) as conn:
        phase = conn.execute("SELECT phase FROM ferryman_runs").fetchone()
        seeded = conn.execute(
            "SELECT phase, count(*) AS n FROM ferryman_tasks GROUP BY phase ORDER BY phase"
        ).fetchall()
    assert phase is not None and phase["phase"] == 1
    assert [(r["phase"], r["n"]) for r in seeded] == [(0, 4), (1, 4)]


def test_nothing_of_a_later_phase_is_queued_before_its_phase_opens(db_url: str) -> None:
    provider = load_provider("democrm")
    with connect.connect(db_url) as conn:
        run = runs.admit(conn, request("http://127.0.0.1:1"))
        queued = runs.start(conn, run)
        with conn.transaction():  # a later-phase task exists early (a stray retry, say)
            phases.seed_tasks(conn, run["id"], 1, [("people", "people:0", {"start": 0})])
            again = schedule.top_up(conn, runs.lock(conn, run["id"]))
            stray = conn.execute(
                "SELECT id FROM ferryman_tasks WHERE phase = 1 AND status = 'pending'"
            ).fetchone()
            assert stray is not None  # top-up left it pending
            # a job handed the stray task anyway (an over-enqueue) finds nothing to claim
            claim = conn.execute(
                queries.engine("claim_task"), {"task_id": stray["id"], "job_id": 1}
            ).fetchone()
        claimed = conn.execute(
            "SELECT count(*) AS n FROM ferryman_tasks WHERE phase = 1 AND status <> 'pending'"
        ).fetchone()
    assert provider.phases[0] == ("organizations",) and len(queued) == 4 and again == []
    assert claim is None
    assert claimed is not None and claimed["n"] == 0


def test_a_task_that_keeps_losing_its_worker_fails_the_run_instead_of_looping(
    db_url: str,
) -> None:
    from ferryman_worker.engine import tasks

    with (
        DemoCRM.start(seed=15, organizations=50, people=0, deals=0) as crm,
        credential(crm.api_key),
    ):
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"]))
        with connect.connect(db_url) as conn:  # as if its worker died this often mid-walk
            conn.execute(
                "UPDATE ferryman_tasks SET attempts = %s WHERE cursor_key = 'organizations:0'",
                (tasks.MAX_CLAIMS,),
            )
        with engine_worker(db_url):
            final = wait_finished(db_url, run_id, timeout=60)
    assert final["state"] == "failed"
    assert "claimed 50 times without finishing" in final["error"]


def test_a_refused_credential_fails_the_run_at_once_instead_of_retrying(db_url: str) -> None:
    with (
        DemoCRM.start(seed=16, organizations=50, people=0, deals=0) as crm,
        credential("not-the-key"),
        engine_worker(db_url),
    ):
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"]))
        final = wait_finished(db_url, run_id, timeout=30)  # retries would take hours
    assert final["state"] == "failed"
    assert "HTTP 401" in final["error"] and "credentialsSecretRef" in final["error"]
    assert "not-the-key" not in final["error"]
    with connect.connect(db_url) as conn:
        jobs = conn.execute(
            "SELECT status, attempts, last_error FROM ferryman_jobs WHERE name = 'ferryman.task'"
        ).fetchall()
    failed = [j for j in jobs if j["status"] == "failed"]
    assert failed and all(j["attempts"] == 1 for j in failed), jobs
    assert all("retrying cannot help" in j["last_error"] for j in failed)


@pytest.mark.slow
def test_a_call_that_keeps_failing_ends_the_attempt_after_six_tries(db_url: str) -> None:
    with (
        DemoCRM.start(seed=17, organizations=10, people=0, deals=0, error_rate=1.0) as crm,
        credential(crm.api_key),
        engine_worker(db_url),
    ):
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"], stripes=1))
        wait_for(lambda: _task_job_errors(db_url), 60, "the first attempt to end")
        calls = crm.stats()["requests"]["GET /v1/organizations"]
        assert state(db_url, run_id)["state"] == "running"  # the queue retries the job later
    (error,) = _task_job_errors(db_url)
    assert "GET /v1/organizations: HTTP 5" in error and "(tried 6 times)" in error
    assert sum(calls.values()) == 6 and set(calls) <= {"500", "502", "503"}


def _task_job_errors(db_url: str) -> list[str]:
    with connect.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT last_error FROM ferryman_jobs"
            " WHERE name = 'ferryman.task' AND last_error IS NOT NULL"
        ).fetchall()
    return [row["last_error"] for row in rows]


def test_a_source_that_is_down_shows_as_tasks_retrying(
    db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # a port nothing listens on
    with credential("any-key"), engine_worker(db_url):
        run_id = start_run(db_url, request(url, kinds=["organizations"], stripes=1))
        wait_for(lambda: _retrying(db_url, run_id), 30, "a failed attempt")
        monkeypatch.setenv("FERRYMAN_DATABASE_URL", db_url)
        assert cli.main(["status", "run-1"]) == 0
    row = _retrying(db_url, run_id)
    assert row is not None and row["tasks"] == 1 and row["max_attempts"] == 25
    assert f"cannot connect to {url} (check spec.source.baseURL" in row["last_error"]
    shown = capsys.readouterr().out
    assert "Running" in shown and "retrying 1 task(s); the latest (organizations task" in shown
    assert f"cannot connect to {url}" in shown and "attempt 1 of 25" in shown


def test_a_credential_the_worker_lacks_is_named_by_ferryman_status_from_the_first_attempt(
    db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with DemoCRM.start(seed=18, organizations=10, people=0, deals=0) as crm:
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"], stripes=1))
        with engine_worker(db_url):  # no credential(...): the Secret is not mounted here
            wait_for(lambda: _retrying(db_url, run_id), 30, "a failed attempt")
            monkeypatch.setenv("FERRYMAN_DATABASE_URL", db_url)
            assert cli.main(["status", "run-1"]) == 0
    shown = capsys.readouterr().out
    assert "  CredentialUnavailable (the source credential" in shown
    assert "retrying 1 task(s)" in shown and "FERRYMAN_CREDENTIAL_DEMOCRM_TOKEN__TOKEN" in shown


def _retrying(db_url: str, run_id: int) -> dict[str, Any] | None:
    with connect.connect(db_url) as conn:
        return runs.retrying(conn, run_id)


def test_a_credential_the_worker_lacks_fails_the_run_on_the_last_attempt(db_url: str) -> None:
    with DemoCRM.start(seed=18, organizations=10, people=0, deals=0) as crm:
        run_id = start_run(db_url, request(crm.url, kinds=["organizations"], stripes=1))
        with connect.connect(db_url) as conn:  # as if 24 attempts had failed already
            conn.execute("UPDATE ferryman_jobs SET attempts = 24 WHERE name = 'ferryman.task'")
        with engine_worker(db_url):  # no credential(...): the Secret is not mounted here
            final = wait_finished(db_url, run_id, timeout=30)
    assert final["state"] == "failed"
    assert "CredentialUnavailable: source credential Secret 'democrm-token'" in final["error"]
    assert "FERRYMAN_CREDENTIAL_DEMOCRM_TOKEN__TOKEN" in final["error"]
    assert contract.cause(final["error"]) == "CredentialUnavailable"


def test_a_failed_run_is_not_reopened_while_its_workspace_has_another_live_run(
    db_url: str,
) -> None:
    with DemoCRM.start(seed=19, organizations=30, people=0, deals=0) as crm:
        with credential("not-the-key"), engine_worker(db_url):
            first = start_run(db_url, request(crm.url, name="run-a", kinds=["organizations"]))
            assert wait_finished(db_url, first, timeout=30)["state"] == "failed"
        start_run(db_url, request(crm.url, name="run-b", kinds=["organizations"]))
        with connect.connect(db_url) as conn:
            failed = runs.by_name(conn, "run-a")
            assert failed is not None
            with pytest.raises(runs.AdmissionRefused, match="'run-b'"):
                runs.retry(conn, failed["id"])
            after = runs.by_name(conn, "run-a")
            tasks = conn.execute(
                "SELECT count(*) AS n FROM ferryman_tasks WHERE run_id = %s AND status = 'failed'",
                (first,),
            ).fetchone()
    assert after is not None and after["state"] == "failed" and after["error"]
    assert tasks is not None and tasks["n"] >= 1  # nothing was reopened


def test_tree_parents_are_text_ids_integers_in_numeric_order(db_url: str) -> None:
    """Parents are seeded by their source ids as text (strings and UUIDs too), integers in
    numeric order; a malformed parent with an id is a parent too, one without is not."""
    provider = load_provider("democrm")
    uuid = "0b7e5c1e-3f7a-4c8e-9a51-5f0c2d6e9b11"
    with connect.connect(db_url) as conn:
        run = runs.admit(conn, request("http://127.0.0.1:1", parents_per_task=3))
        ids = ["10", "9", "100", uuid, "org-7"]
        conn.execute(
            "INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)"
            " SELECT 'acme', 'deals', sid, n, %s FROM unnest(%s::text[]) WITH ORDINALITY"
            " AS t(sid, n)",
            (run["id"], ids),
        )
        conn.execute(
            "INSERT INTO ferryman_row_errors (run_id, task_id, kind, source_id, reason)"
            " VALUES (%s, 0, 'deals', '11', 'too long'), (%s, 0, 'deals', NULL, 'no id')",
            (run["id"], run["id"]),
        )
        with conn.transaction():
            phases.seed_phase(conn, runs.lock(conn, run["id"]), provider, 3)
        seeded = conn.execute(
            "SELECT cursor_key, cursor -> 'parents' AS parents FROM ferryman_tasks"
            " WHERE kind = 'messages' ORDER BY id"
        ).fetchall()
    assert [(row["cursor_key"], row["parents"]) for row in seeded] == [
        ("messages:9", ["9", "10", "11"]),
        ("messages:100", ["100", "org-7", uuid]),
    ]


def test_source_options_the_provider_lacks_are_refused_at_admission(db_url: str) -> None:
    bad = dataclasses.replace(request("http://127.0.0.1:1"), source_options={"region": "eu"})
    with connect.connect(db_url) as conn:
        with pytest.raises(ConfigurationError) as caught:
            runs.admit(conn, bad)
        admitted = conn.execute("SELECT count(*) AS n FROM ferryman_runs").fetchone()
    assert str(caught.value) == (
        "spec.source.options.region: 'democrm' has no option 'region' (it has: none)"
    )
    assert admitted is not None and admitted["n"] == 0
