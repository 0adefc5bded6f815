"""How a task's windows commit: asynchronously by default (a database crash loses at most the last
windows, whole, with their checkpoints, and their tasks write them again), synchronously with
``sync_windows``. Each window's statement says so for its own transaction (``set_config`` local
to it), so no setting of the task's outlives its windows on the lane's connection."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from migration import credential, request, start_run, wait_finished
from tests.democrm.server_fixture import DEFAULT_API_KEY, DemoCRM

from ferryman_worker.db import connect
from ferryman_worker.engine.runtime import RESOURCE, EngineRuntime
from ferryman_worker.queue.worker import Worker
from ferryman_worker.settings import Settings

WATCH = """
CREATE TABLE commit_modes (task_id bigint, processed_offset integer, mode text);
CREATE FUNCTION note_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO commit_modes VALUES (NEW.id, NEW.processed_offset,
                                     current_setting('synchronous_commit'));
    RETURN NEW;
END $$;
CREATE TRIGGER note_commit_mode AFTER UPDATE OF processed_offset ON ferryman_tasks
    FOR EACH ROW EXECUTE FUNCTION note_commit_mode();
"""
"""Records the setting in force in each transaction that moves a task's checkpoint (a window's):
what its commit will obey. (A trigger in the test database: no other observer sees inside the
window's transaction.)"""


@contextlib.contextmanager
def worker(db_url: str, *, sync_windows: bool) -> Iterator[None]:
    runtime = EngineRuntime(database_url=db_url, sync_windows=sync_windows)
    running = Worker(Settings(lanes="migrations:2"), db_url, resources={RESOURCE: runtime})
    running.start()
    try:
        yield
    finally:
        running.stop(grace=10)
        runtime.close()


@pytest.mark.parametrize(("sync_windows", "mode"), [(False, "off"), (True, "on")])
def test_each_window_commits_as_the_worker_says(db_url: str, sync_windows: bool, mode: str) -> None:
    with connect.connect(db_url) as conn:
        conn.execute(WATCH)
        session = conn.execute("SHOW synchronous_commit").fetchone()
    assert session == {"synchronous_commit": "on"}
    with (
        DemoCRM.start(seed=3, organizations=600, people=0, deals=0) as crm,
        credential(DEFAULT_API_KEY),
        worker(db_url, sync_windows=sync_windows),
    ):
        run = wait_finished(db_url, start_run(db_url, request(crm.url, kinds=["organizations"])))
        with connect.connect(db_url) as conn:
            modes = conn.execute("SELECT mode, count(*) AS n FROM commit_modes GROUP BY mode")
            seen = {row["mode"]: row["n"] for row in modes}
    assert run["state"] == "succeeded" and run["rows_written"] > 0
    assert set(seen) == {mode}, seen
    assert seen[mode] >= 600 // 50, seen  # every window, the tasks' last ones included
