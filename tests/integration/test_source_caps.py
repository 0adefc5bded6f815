"""One source cannot exhaust a worker: an answer past the size cap is dropped as it streams in,
and a call ends at its timeout in all however slowly its bytes arrive. Real ``ferryman worker``
processes against a real server that streams 2 GB (made as it is sent) or drips for ever."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from flood import Flood, flooding
from migration import SECRET, request, start_run, state, task_jobs
from net import wait_for
from runfiles import command_env, run_file
from tests.democrm.server_fixture import DemoCRM
from workers import Subprocess

from ferryman_worker.engine.runtime import credential_env_var

GIGABYTES_2 = 2 * 2**30
PEAK_ALLOWED = 512 * 2**20
"""The worker's resident memory must stay below this (it holds at most the 64 MiB cap)."""


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory in bytes (VmHWM), 0 once it is gone."""
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return 0
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def _run_against(
    db_url: str, source: Flood, done: Callable[[int], bool], **env: str
) -> tuple[dict[str, Any], int]:
    """A run of the organizations against ``source`` by one real worker, until ``done(run
    id)``; the run's state and the worker's peak memory. The worker is stopped as soon as its
    memory passes PEAK_ALLOWED (the machine is shared: a 2 GB answer read whole would take
    2 GB of it)."""
    variable = credential_env_var(SECRET["name"], SECRET["key"])
    worker = Subprocess(db_url, "migrations:1", {variable: "k3y", **env})
    try:
        worker.wait_ready()
        run_id = start_run(db_url, request(source.url, kinds=["organizations"], stripes=1))
        over = lambda: _peak_rss(worker.pid) > PEAK_ALLOWED  # noqa: E731
        wait_for(lambda: over() or done(run_id), 120, f"run {run_id}", interval=0.1)
        return state(db_url, run_id), _peak_rss(worker.pid)
    finally:
        worker.stop()


def _ended(db_url: str) -> Callable[[int], bool]:
    return lambda run_id: state(db_url, run_id)["state"] != "running"


def _attempt_failed(db_url: str) -> Callable[[int], bool]:
    """Whether the run's task job has failed an attempt (its last error is written)."""
    return lambda run_id: any(job["last_error"] for job in task_jobs(db_url))


@pytest.mark.timeout(240)
def test_a_2_gb_answer_is_dropped_at_the_cap_and_the_worker_stays_small(db_url: str) -> None:
    with flooding(GIGABYTES_2) as source:
        final, peak = _run_against(db_url, source, _ended(db_url))
        sent = source.sent
    assert peak < PEAK_ALLOWED, f"the worker's memory reached {peak >> 20} MiB"
    assert final["state"] == "failed"
    assert "the answer is larger than 67108864 bytes" in final["error"]
    assert "FERRYMAN_SOURCE_MAX_RESPONSE_BYTES" in final["error"]
    assert sent < GIGABYTES_2  # the worker hung up: the rest was never made


@pytest.mark.timeout(240)
def test_an_answer_that_drips_for_ever_ends_at_the_timeout_in_all(db_url: str) -> None:
    with flooding(GIGABYTES_2, chunk=16, pause=0.05) as source:
        _run_against(db_url, source, _attempt_failed(db_url), FERRYMAN_SOURCE_TIMEOUT="1")
    [job] = task_jobs(db_url)
    assert "took longer than 1s in all" in job["last_error"]
    assert "FERRYMAN_SOURCE_TIMEOUT" in job["last_error"]


@pytest.mark.timeout(240)
def test_headers_that_drip_for_ever_end_at_the_timeout_in_all(db_url: str) -> None:
    """Each byte of the status line and headers comes well within the read timeout: only the
    call's time in all can end it."""
    with flooding(0, header_pause=0.05) as source:
        _run_against(db_url, source, _attempt_failed(db_url), FERRYMAN_SOURCE_TIMEOUT="1")
    [job] = task_jobs(db_url)
    assert "took longer than 1s in all" in job["last_error"]
    assert "FERRYMAN_SOURCE_TIMEOUT" in job["last_error"]


PAGED = {"organizations": 600, "people": 0, "deals": 0, "malformed_rate": 0}
"""Six pages of 100 organizations, for a bound of three."""


@pytest.mark.timeout(240)
def test_a_listing_past_the_installations_page_bound_fails_naming_the_setting(
    db_url: str,
) -> None:
    with DemoCRM.start(seed=41, **PAGED) as crm:
        variable = credential_env_var(SECRET["name"], SECRET["key"])
        env = {variable: crm.api_key, "FERRYMAN_SOURCE_MAX_PAGES": "3"}
        worker = Subprocess(db_url, "migrations:1", env)
        try:
            worker.wait_ready()
            req = request(crm.url, kinds=["organizations"], stripes=1, page_size=100)
            run_id = start_run(db_url, req)
            wait_for(lambda: _ended(db_url)(run_id), 120, f"run {run_id}")
        finally:
            worker.stop()
    final = state(db_url, run_id)
    assert final["state"] == "failed"
    assert "organizations: the listing goes on past 3 pages" in final["error"]
    assert "FERRYMAN_SOURCE_MAX_PAGES" in final["error"]


def _ferryman_run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ferryman_worker.cli", "--log-level", "WARNING", "run"]
    return subprocess.run([*command, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(240)
def test_ferryman_run_takes_the_page_bound_from_its_flag(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    with DemoCRM.start(seed=41, **PAGED) as crm:
        env = command_env(crm.api_key, FERRYMAN_DATABASE_URL=db_url, FERRYMAN_LANES="migrations:1")
        done = _ferryman_run(run_file(tmp_path, crm.url), "--source-max-pages", "3", env=env)
    assert done.returncode == 1, done.stderr
    assert "past 3 pages" in done.stdout + done.stderr


def test_a_page_bound_below_one_is_refused_naming_the_setting(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    env = command_env("k", FERRYMAN_DATABASE_URL=db_url)
    path = run_file(tmp_path, "http://127.0.0.1:1")
    done = _ferryman_run(path, "--source-max-pages", "0", env=env)
    assert done.returncode == 2
    assert "source_max_pages (FERRYMAN_SOURCE_MAX_PAGES)" in done.stderr
    assert "greater than or equal to 1" in done.stderr
