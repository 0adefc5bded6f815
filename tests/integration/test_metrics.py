"""The worker's /metrics, scraped from a real ``ferryman worker`` process during a real faulty
run (5xx, 429s, malformed records, gone deals), parsed with prometheus_client's own parser and
checked against the database and the demo CRM's own call counts."""

from __future__ import annotations

import datetime
from typing import Any

import ferryman_testjobs as tj
import httpx
from faulty import PASSWORD, TOKEN, faulty_crm, worker_process
from migration import request, start_run, wait_finished
from net import free_port, wait_for
from scrape import has, scrape, total
from workers import SUPPORT

from ferryman_worker.db import connect
from ferryman_worker.engine.credentials import Credential, url_host
from ferryman_worker.engine.ratelimit import credential_key
from ferryman_worker.providers.democrm import BODY_COST, LISTING_COST
from ferryman_worker.queue import enqueue

LISTINGS = ("/v1/organizations", "/v1/people", "/v1/deals", "/v1/deals/{id}/messages")


def db(db_url: str, query: str, *params: Any) -> dict[str, Any]:
    with connect.connect(db_url) as conn:
        row = conn.execute(query, params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return row


def test_a_faulty_runs_metrics_match_the_database_and_the_sources_counts(db_url: str) -> None:
    port = free_port()
    rate = {"burst": 200, "tokens_per_second": 5000}  # declared, above the source's: 429s still
    with (
        faulty_crm() as crm,
        worker_process(
            db_url, "--lanes", "migrations:3", env={"FERRYMAN_METRICS_PORT": str(port)}
        ) as worker,
    ):
        wait_for(lambda: _ready(port), 30, "the worker's /readyz")
        run_id = start_run(db_url, request(crm.url, page_size=100, rate_limit=rate))
        wait_for(lambda: total(scrape(port)[1], "ferryman_rows_total") > 0, 60, "rows counted")
        _, during = scrape(port)
        final = wait_finished(db_url, run_id, timeout=240)
        wait_for(
            lambda: total(scrape(port)[1], "ferryman_lane_threads_busy") == 0, 30, "idle lanes"
        )
        text, after = scrape(port)
        stats = crm.stats()["requests"]
        worker.stop()
    assert final["state"] == "succeeded", final["error"]
    assert TOKEN not in text and PASSWORD not in text
    assert has(during, "ferryman_rows_total", run="run-1")
    assert total(after, "ferryman_lane_threads", lane="migrations") == 3

    # rows, per kind and outcome, as the tasks recorded them
    for kind in ("organizations", "people", "deals", "messages"):
        row = db(
            db_url,
            "SELECT sum(rows_written) AS written, sum(rows_skipped) AS skipped,"
            " sum(rows_matched) AS matched, sum(rows_failed) AS malformed"
            " FROM ferryman_tasks WHERE run_id = %s AND kind = %s",
            run_id,
            kind,
        )
        for outcome in ("written", "skipped", "matched", "malformed"):
            got = total(after, "ferryman_rows_total", run="run-1", kind=kind, outcome=outcome)
            assert got == row[outcome], (kind, outcome, got, row[outcome])
    assert total(after, "ferryman_rows_total", outcome="malformed") > 0

    # source calls by outcome, as the demo CRM counted them
    def answered(*statuses: str, path: str | None = None) -> int:
        return sum(
            n
            for endpoint, counts in stats.items()
            if path is None or endpoint == f"GET {path}"
            for status, n in counts.items()
            if status in statuses
        )

    credential = credential_key(crm.url, Credential({"token": TOKEN}, (url_host(crm.url),)).id)
    calls = {
        outcome: total(after, "ferryman_source_calls_total", credential=credential, outcome=outcome)
        for outcome in ("2xx", "4xx", "429", "5xx", "timeout", "error")
    }
    assert calls == {
        "2xx": answered("200"),
        "4xx": answered("404"),
        "429": answered("429"),
        "5xx": answered("500", "502", "503"),
        "timeout": 0,
        "error": 0,
    }, stats
    assert calls["429"] > 0 and calls["5xx"] > 0 and calls["4xx"] > 0
    assert total(after, "ferryman_source_call_seconds_count") == sum(calls.values())
    every = ("200", "404", "429", "500", "502", "503")
    spent = LISTING_COST * sum(answered(*every, path=p) for p in LISTINGS) + BODY_COST * answered(
        *every, path="/v1/messages/{id}"
    )
    assert total(after, "ferryman_source_tokens_spent_total", credential=credential) == spent
    assert total(after, "ferryman_source_tokens_leased_total", credential=credential) >= spent
    assert total(after, "ferryman_source_paused_seconds_total", credential=credential) >= 1
    assert total(after, "ferryman_source_token_wait_seconds_total", credential=credential) > 0
    assert total(after, "ferryman_source_calls_in_flight") == 0
    assert total(after, "ferryman_fetch_threads") == 0

    # jobs, as the queue recorded them
    jobs = db(
        db_url,
        "SELECT sum(claims) AS claims, sum(attempts) AS attempts, sum(deferrals) AS deferrals,"
        " count(*) FILTER (WHERE status = 'succeeded') AS succeeded,"
        " count(*) FILTER (WHERE status = 'failed') AS failed"
        " FROM ferryman_jobs WHERE queue = 'migrations'",
    )
    task = {"queue": "migrations", "job": "ferryman.task"}
    assert total(after, "ferryman_jobs_claimed_total", **task) == jobs["claims"]
    finished = {
        outcome: total(after, "ferryman_jobs_finished_total", outcome=outcome, **task)
        for outcome in ("succeeded", "retried", "failed", "deferred")
    }
    assert finished == {
        "succeeded": jobs["succeeded"],
        "retried": jobs["attempts"] - jobs["succeeded"] - jobs["failed"],
        "failed": jobs["failed"],
        "deferred": jobs["deferrals"],
    }
    assert total(after, "ferryman_job_duration_seconds_count", **task) == sum(finished.values())
    assert (
        total(after, "ferryman_job_wake_latency_seconds_count", queue="migrations")
        == (jobs["claims"])
    )
    windows = total(after, "ferryman_window_commit_seconds_count")
    assert windows >= db(db_url, "SELECT count(*) AS n FROM ferryman_tasks")["n"]


def test_queue_depths_are_read_at_scrape_time_cached_and_a_runs_series_go_after_it_ends(
    db_url: str,
) -> None:
    port = free_port()
    with (
        faulty_crm(error_rate=0, budget_capacity=0, organizations=300, people=0, deals=0) as crm,
        worker_process(
            db_url, "--lanes", "migrations:2", env={"FERRYMAN_METRICS_PORT": str(port)}
        ) as worker,
    ):
        wait_for(lambda: _ready(port), 30, "the worker's /readyz")
        # a queue no lane of this worker serves: its jobs stay ready (or scheduled)
        later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
        with connect.connect(db_url) as conn:
            for n in range(3):
                enqueue(tj.record.call(n=n).with_options(queue="reports"), conn=conn)
            enqueue(tj.record.call(n=9).with_options(queue="reports", run_at=later), conn=conn)
        _, first = scrape(port)  # the first scrape reads the database
        assert total(first, "ferryman_queue_ready_jobs", queue="reports") == 3
        assert total(first, "ferryman_queue_scheduled_jobs", queue="reports") == 1
        assert 0 < total(first, "ferryman_queue_oldest_ready_seconds", queue="reports") < 60
        with connect.connect(db_url) as conn:
            enqueue(tj.record.call(n=3).with_options(queue="reports"), conn=conn)
        _, cached = scrape(port)  # within the cache's few seconds: the same answer
        assert total(cached, "ferryman_queue_ready_jobs", queue="reports") == 3
        wait_for(
            lambda: total(scrape(port)[1], "ferryman_queue_ready_jobs", queue="reports") == 4,
            10,
            "the cache to expire",
        )

        run_id = start_run(db_url, request(crm.url, name="short", kinds=["organizations"]))
        assert wait_finished(db_url, run_id, timeout=120)["state"] == "succeeded"
        _, ended = scrape(port)  # the run's last values are still shown once it ended
        assert total(ended, "ferryman_rows_total", run="short", outcome="written") > 0
        wait_for(
            lambda: not has(scrape(port)[1], "ferryman_rows_total", run="short"),
            20,
            "the ended run's series to go",
        )
        worker.stop()


def test_a_jobs_wake_up_latency_is_from_its_due_time_to_its_claim(db_url: str) -> None:
    """The claim returns how long the job waited since it was due, on the database's clock: a
    job enqueued while no worker ran waited at least until the worker started."""
    with connect.connect(db_url) as conn:
        job_id = enqueue(tj.noop.call().with_options(queue="wakeprobe"), conn=conn)
    wait_for(
        lambda: db(
            db_url,
            "SELECT clock_timestamp() - created_at > interval '1.5 s' AS due FROM ferryman_jobs"
            " WHERE id = %s",
            job_id,
        )["due"],
        10,
        "the job to have waited 1.5 s",
    )
    port = free_port()
    env = {
        "FERRYMAN_METRICS_PORT": str(port),
        "FERRYMAN_IMPORTS": "ferryman_testjobs",
        "PYTHONPATH": str(SUPPORT),
    }
    with worker_process(db_url, "--lanes", "wakeprobe:1", env=env) as worker:
        wait_for(
            lambda: (
                db(db_url, "SELECT status FROM ferryman_jobs WHERE id = %s", job_id)["status"]
                == "succeeded"
            ),
            30,
            "the job to run",
        )
        _, after = scrape(port)
        worker.stop()
    waited = db(
        db_url,
        "SELECT extract(epoch FROM claimed_at - created_at)::float8 AS s FROM ferryman_jobs"
        " WHERE id = %s",
        job_id,
    )["s"]
    assert total(after, "ferryman_job_wake_latency_seconds_count", queue="wakeprobe") == 1
    wake = total(after, "ferryman_job_wake_latency_seconds_sum", queue="wakeprobe")
    assert wake >= 1.5 and abs(wake - waited) < 0.5


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False
