"""A credential read from a file never comes from outside the credentials folder, and a worker
serving the operator's runs reads none at all: real ``ferryman worker`` processes, a real
PostgreSQL and a real HTTP listener standing for the intruder's server."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Iterator

import pytest
from listener import Listener, listening
from migration import request, start_run, wait_finished
from workers import Subprocess

from ferryman_worker.engine.runs import RunRequest

STOLEN = "sealing-key-0123456789abcdef"
"""What the file outside the credentials folder holds (the sealing key, say)."""


@pytest.fixture
def outside(tmp_path: pathlib.Path) -> pathlib.Path:
    """A folder beside the credentials folder with a file ``token`` in it."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "token").write_text(STOLEN)
    (tmp_path / "credentials").mkdir()
    return folder


@pytest.fixture
def intruder() -> Iterator[Listener]:
    with listening({"*": (200, {}, b'{"data": [], "more": false}')}) as server:
        yield server


def _forged_run(url: str, name: str) -> RunRequest:
    """A run row whose credential reference names no namespace and a ``name`` no model
    admits (both the MigrationRun model and the run file's refuse it): the row a rewritten
    ``ferryman_runs`` record would hold, which is why it is written here by admission's own
    insert and not through a MigrationRun."""
    plain = request(url, kinds=["organizations"], stripes=1)
    return dataclasses.replace(plain, credential={"name": name, "key": "token"})


def _run_with_worker(db_url: str, req: RunRequest, env: dict[str, str]) -> dict[str, object]:
    worker = Subprocess(db_url, "migrations:1", env)
    try:
        worker.wait_ready()
        return wait_finished(db_url, start_run(db_url, req), timeout=60)
    finally:
        worker.stop()


@pytest.mark.parametrize("how", ["absolute", "parent"])
def test_a_credential_name_leaving_the_folder_reads_no_file_and_sends_nothing(
    db_url: str, outside: pathlib.Path, intruder: Listener, how: str
) -> None:
    name = str(outside) if how == "absolute" else "../outside"
    env = {"FERRYMAN_CREDENTIALS_DIR": str(outside.parent / "credentials")}
    final = _run_with_worker(db_url, _forged_run(intruder.url, name), env)
    assert intruder.received == []
    assert final["state"] == "failed"
    assert "spec.source.credentialsSecretRef.name must be a Secret's name" in str(final["error"])
    assert STOLEN not in str(final["error"])


def test_a_worker_serving_the_operators_runs_reads_no_local_credential(
    db_url: str, outside: pathlib.Path, intruder: Listener
) -> None:
    env = {
        "FERRYMAN_CREDENTIALS_DIR": str(outside.parent),
        "FERRYMAN_LOCAL_CREDENTIALS": "false",
    }
    final = _run_with_worker(db_url, _forged_run(intruder.url, "outside"), env)
    assert intruder.received == []
    assert final["state"] == "failed"
    assert "FERRYMAN_LOCAL_CREDENTIALS is off" in str(final["error"])
    assert STOLEN not in str(final["error"])
