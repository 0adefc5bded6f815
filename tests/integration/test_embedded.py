"""``ferryman`` on the embedded PostgreSQL, as a newcomer meets it: bad input is refused before
any server starts, a command that started the server stops it when it ends, the server's own
logging stays quiet, and the commands a run's summary suggests work when pasted into a shell.

These tests start servers of their own (FERRYMAN_DATABASE_URL unset), in temporary folders."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest
from runfiles import command_env, run_file
from tests.democrm.server_fixture import DemoCRM

FERRYMAN = str(pathlib.Path(sys.executable).with_name("ferryman"))  # the venv's console script


def _env(folder: pathlib.Path, api_key: str | None = None) -> dict[str, str]:
    return command_env(api_key, FERRYMAN_EMBEDDED_DIR=str(folder), FERRYMAN_LANES="migrations:2")


def _ferryman(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FERRYMAN, *args], env=env, capture_output=True, text=True, timeout=180, check=False
    )


@pytest.fixture
def folder() -> Iterator[pathlib.Path]:
    """Where a test's embedded server lives (not made yet): outside pytest's temporary folders,
    whose root another pytest session on the machine makes private again (mode 0700) while the
    server's own user (pgserver's, when run as root) must reach it."""
    parent = pathlib.Path(tempfile.mkdtemp(prefix="ferryman-embedded-test-"))
    try:
        yield parent / "pg"
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def _running(folder: pathlib.Path) -> bool:
    """A server runs on the folder: its postmaster.pid exists (a clean stop removes it)."""
    return (folder / "postmaster.pid").exists()


def test_a_bad_run_file_is_refused_before_any_server_starts(
    tmp_path: pathlib.Path, folder: pathlib.Path
) -> None:
    path = run_file(tmp_path, "http://127.0.0.1:1", page_size=0)
    result = _ferryman("run", path, env=_env(folder))
    assert result.returncode == 2, result.stderr
    assert "spec.options.pageSize" in result.stderr
    assert not folder.exists()  # not started, not even initialised


@pytest.mark.slow
def test_commands_that_start_the_server_stop_it_and_say_nothing_of_it(
    folder: pathlib.Path,
) -> None:
    first = _ferryman("db", "migrate", env=_env(folder))
    assert first.returncode == 0, first.stderr
    assert (folder / "PG_VERSION").exists() and not _running(folder)
    second = _ferryman("status", env=_env(folder))
    assert second.returncode == 0 and "no runs" in second.stdout, second.stderr
    assert not _running(folder)
    for result in (first, second):  # INFO is the default level; pgserver's INFO is not shown
        assert "pgserver" not in result.stderr and "psutil" not in result.stderr


@pytest.mark.slow
def test_the_summary_suggests_a_command_that_works_when_pasted(
    tmp_path: pathlib.Path, folder: pathlib.Path
) -> None:
    with DemoCRM.start(seed=41, organizations=300, people=60, deals=10, malformed_rate=0.05) as crm:
        path = run_file(tmp_path, crm.url)
        result = _ferryman("run", path, env=_env(folder, crm.api_key))
    assert result.returncode == 0, result.stderr
    assert not _running(folder)
    found = re.search(r"not written: `([^`]+)` lists them", result.stdout)
    assert found, result.stdout
    pasted = found.group(1)
    assert pasted.endswith(" errors default/acme-crm")
    shell_env = {k: v for k, v in os.environ.items() if not k.startswith("FERRYMAN_")}
    listed = subprocess.run(
        pasted, shell=True, env=shell_env, capture_output=True, text=True, timeout=120, check=False
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split()[:4] == ["KIND", "SOURCE_ID", "AT", "REASON"]
    assert len(listed.stdout.splitlines()) > 1
    assert not _running(folder)


def test_a_restarted_server_is_stopped_even_when_a_killed_process_had_attached(
    folder: pathlib.Path,
) -> None:
    """The chaos tests restart the session's server, and a process that attached to a server
    (pgserver counts its users) may die by SIGKILL without detaching. Stopping the server must
    still stop the restarted postmaster (pgserver's handle remembers the pid it started, and its
    own cleanup leaves the server to the users it still counts) and delete its folder."""
    from ferryman_worker.db import embedded

    folder.mkdir()
    server = embedded.start(folder, cleanup="delete")
    attach = (
        f"from ferryman_worker.db import embedded; embedded.start({str(folder)!r}); print('in')"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", attach + "; import time; time.sleep(60)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "in"
    child.kill()
    child.wait()
    child.stdout.close()
    live = lambda: int((folder / "postmaster.pid").read_text().split()[0])  # noqa: E731
    first = live()
    server.restart()
    restarted = live()
    assert restarted != first
    server.stop()
    if not embedded._zombie(restarted):  # exited; a zombie only waits for its parent's reap
        with pytest.raises(ProcessLookupError):
            os.kill(restarted, 0)
    assert not folder.exists()
