"""Running migration runs in tests: admission, an in-process worker with the engine, and the
check of a destination against the demo CRM's ground truth."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

from net import wait_for
from workers import Subprocess, scalar

from ferryman_worker import contract
from ferryman_worker.db import connect
from ferryman_worker.engine import runs
from ferryman_worker.engine import tasks as _tasks  # noqa: F401  (registers the task job)
from ferryman_worker.engine.credentials import Credential, Sealer
from ferryman_worker.engine.runtime import RESOURCE, EngineRuntime, credential_env_var
from ferryman_worker.queue.worker import Worker
from ferryman_worker.runspec import RunOptions
from ferryman_worker.settings import Settings

SECRET = {"name": "democrm-token", "key": "token"}
TABLES = {
    "organizations": "crm_organizations",
    "people": "crm_people",
    "deals": "crm_deals",
    "messages": "crm_messages",
}


def options(**changes: Any) -> dict[str, Any]:
    """The engine's options for a MigrationRun with default options (lane of 4), changed."""
    return {**contract.engine_options(RunOptions(), max_in_flight=8), **changes}


def request(
    url: str,
    name: str = "run-1",
    workspace: str = "acme",
    kinds: list[str] | None = None,
    provider_definition: dict[str, Any] | None = None,
    provider: str = "democrm",
    **option_changes: Any,
) -> runs.RunRequest:
    """A run of the demo CRM provider (or of ``provider_definition``, a declarative provider
    named ``democrm``, such as one of ``democrm_styles``; or of the Python one,
    ``democrm_python``)."""
    return runs.RunRequest(
        name=name,
        workspace=workspace,
        provider=provider,
        base_url=url,
        credential=SECRET,
        kinds=kinds or [],
        options=options(**option_changes),
        provider_definition=provider_definition,
    )


def sealed(
    plain: runs.RunRequest, key_file: pathlib.Path, credential: Credential
) -> runs.RunRequest:
    """``plain`` as a run of namespace tenant-a the operator admitted: its credential (a
    Secret ``crm`` there) sealed with the key in ``key_file``."""
    return dataclasses.replace(
        plain,
        name="tenant-a/run-1",
        credential={"name": "crm", "key": "token", "namespace": "tenant-a"},
        namespace="tenant-a",
        sealed=runs.Sealed(credential.hosts, Sealer(key_file.read_bytes()).seal(credential)),
    )


@contextlib.contextmanager
def credential(api_key: str) -> Iterator[None]:
    variable = credential_env_var(SECRET["name"], SECRET["key"])
    os.environ[variable] = api_key
    try:
        yield
    finally:
        os.environ.pop(variable, None)


@contextlib.contextmanager
def engine_worker(db_url: str, lanes: str = "migrations:4", **settings: Any) -> Iterator[Worker]:
    config = Settings(lanes=lanes, **settings)
    runtime = EngineRuntime(
        source_timeout=config.source_timeout,
        sealing_key_file=config.sealing_key_file,
        database_url=db_url,
        max_response_bytes=config.source_max_response_bytes,
    )
    worker = Worker(config, db_url, resources={RESOURCE: runtime})
    worker.start()
    try:
        yield worker
    finally:
        worker.stop(grace=10)
        runtime.close()


def start_run(db_url: str, req: runs.RunRequest) -> int:
    with connect.connect(db_url) as conn:
        run = runs.admit(conn, req)
        runs.start(conn, run)
        return int(run["id"])


def state(db_url: str, run_id: int) -> dict[str, Any]:
    with connect.connect(db_url) as conn:
        return runs.progress(conn, run_id)[0]


def ready_task_jobs(db_url: str) -> int:
    """How many task jobs are ready (waiting, or running)."""
    return int(
        scalar(
            db_url,
            "SELECT count(*) FROM ferryman_jobs WHERE name = 'ferryman.task' AND status = 'ready'",
        )
    )


def task_jobs(db_url: str) -> list[dict[str, Any]]:
    """The task jobs, oldest first: id, status, attempts, run_at, last_error, args."""
    with connect.connect(db_url) as conn:
        return conn.execute(
            "SELECT id, status, attempts, run_at, last_error, args FROM ferryman_jobs"
            " WHERE name = 'ferryman.task' ORDER BY id"
        ).fetchall()


def wait_finished(db_url: str, run_id: int, timeout: float = 120) -> dict[str, Any]:
    wait_for(
        lambda: state(db_url, run_id)["state"] != "running", timeout, f"run {run_id}", interval=0.1
    )
    return state(db_url, run_id)


def check_against_truth(
    db_url: str,
    truth: dict[str, Any],
    workspace: str = "acme",
    kinds: tuple[str, ...] = tuple(TABLES),
) -> None:
    """Destination = truth minus malformed; malformed = exactly the recorded row errors."""
    with connect.connect(db_url) as conn:
        for kind in kinds:
            table = TABLES[kind]
            rows = conn.execute(
                f"SELECT source_id FROM {table} WHERE workspace = %s",  # type: ignore[arg-type]
                (workspace,),
            ).fetchall()
            got = [int(r["source_id"]) for r in rows]
            malformed = {int(i) for i in truth[kind]["malformed"]}
            expected = set(truth[kind]["ids"]) - malformed
            assert len(got) == len(set(got)), f"{kind}: a source row was written twice"
            missing, extra = sorted(expected - set(got)), sorted(set(got) - expected)
            assert not missing and not extra, f"{kind}: missing {missing[:5]}, extra {extra[:5]}"
            errors = conn.execute(
                "SELECT source_id FROM ferryman_row_errors WHERE kind = %s", (kind,)
            ).fetchall()
            assert {int(e["source_id"]) for e in errors} == malformed, f"{kind}: row errors"
            ledger = conn.execute(
                "SELECT count(*) AS n FROM ferryman_ledger WHERE kind = %s AND workspace = %s",
                (kind, workspace),
            ).fetchone()
            assert ledger is not None and ledger["n"] == len(expected)


def barrier_held(db_url: str, run_id: int) -> None:
    """No task of a phase was claimed before every task of the phase before it finished."""
    with connect.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT phase, min(claimed_at) AS first_claim, max(finished_at) AS last_finish"
            " FROM ferryman_tasks WHERE run_id = %s GROUP BY phase ORDER BY phase",
            (run_id,),
        ).fetchall()
    for before, after in itertools.pairwise(rows):
        assert after["first_claim"] >= before["last_finish"], (before, after)


def landed_once(db_url: str, workspace: str, counts: dict[str, int]) -> None:
    """Per kind of the landing table: ``counts[kind]`` records landed for ``workspace``, each
    source id once, each with its ledger slot."""
    with connect.connect(db_url) as conn:
        landed = conn.execute(
            "SELECT kind, count(*) AS n, count(DISTINCT source_id) AS ids FROM ferryman_landing"
            " WHERE workspace = %s GROUP BY kind",
            (workspace,),
        ).fetchall()
        ledger = conn.execute(
            "SELECT kind, count(*) AS n FROM ferryman_ledger WHERE workspace = %s GROUP BY kind",
            (workspace,),
        ).fetchall()
    assert {row["kind"]: row["n"] for row in landed} == counts
    assert {row["kind"]: row["ids"] for row in landed} == counts  # none twice
    assert {row["kind"]: row["n"] for row in ledger} == counts


def sigkill_mid_run(
    db_url: str,
    run_id: int,
    total: int,
    start: Callable[[], Subprocess],
    workers: int,
    kills: int = 3,
) -> dict[str, Any]:
    """``workers`` processes from ``start``; each time another ``1/(kills + 2)`` of ``total``
    rows is written, the oldest is SIGKILLed and another started (two parts are left after the
    last kill, and a new process is waited for only when its turn to be killed comes: the run
    must not end while the test waits). Returns the run's final state. Kills follow the run's
    progress, not the clock: a slow machine slows both."""
    running = [_ready(start()) for _ in range(workers)]
    try:
        for kill in range(1, kills + 1):
            at = kill * total // (kills + 2)
            written: Callable[[], bool] = lambda at=at: (  # noqa: E731
                state(db_url, run_id)["rows_written"] >= at
            )
            wait_for(written, 300, f"{at} of {total} rows written", interval=0.1)
            assert state(db_url, run_id)["state"] == "running", f"the run ended before kill {kill}"
            _ready(running.pop(0)).kill()
            running.append(start())
        return wait_finished(db_url, run_id, timeout=600)
    finally:
        for proc in running:
            proc.stop()


def _ready(proc: Subprocess) -> Subprocess:
    proc.wait_ready()
    return proc


def extra_claims(db_url: str, run_id: int) -> int:
    """Claims beyond one per task: the work crashes and retries cost."""
    query = "SELECT coalesce(sum(attempts) - count(*), 0) FROM ferryman_tasks WHERE run_id = %s"
    return int(scalar(db_url, query, (run_id,)))


def crashing_worker(
    db_url: str,
    api_key: str,
    point: str,
    lanes: str = "migrations:2",
    stops: str = "",
    stop_log: pathlib.Path | None = None,
) -> Subprocess:
    """A ``ferryman worker`` process that SIGKILLs itself at ``point``, and SIGSTOPs itself at
    each of ``stops``, saying which in ``stop_log`` (ferryman_crashhooks)."""
    env = {
        credential_env_var(SECRET["name"], SECRET["key"]): api_key,
        "FERRYMAN_IMPORTS": "ferryman_testjobs,ferryman_crashhooks",
        "FERRYMAN_TEST_CRASH_AT": point,
        "FERRYMAN_TEST_STOP_AT": stops,
        "FERRYMAN_TEST_STOP_LOG": str(stop_log or os.devnull),
    }
    proc = Subprocess(db_url, lanes, env)
    if not point and not stops:  # one that crashes or stops may do so before a poll sees it
        proc.wait_ready()
    return proc


def stopped_at(proc: Subprocess, stop_log: pathlib.Path, point: str) -> bool:
    """The process stopped itself at ``point``, its last stop: every thread in state T (the
    first to stop may not be the one that stopped the process, which can still send a query)."""
    said = stop_log.read_text().split() if stop_log.exists() else []
    threads = pathlib.Path(f"/proc/{proc.pid}/task").glob("*/stat")
    states = {stat.read_text().rpartition(")")[2].split()[0] for stat in threads}
    return said[-1:] == [point] and states == {"T"}
