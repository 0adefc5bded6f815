"""Logs: one JSON object per line from a real worker process during a faulty run, with the run,
task and job ids where they apply, and never a secret."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys

from faulty import PASSWORD, TOKEN, faulty_crm, worker_process
from migration import request, start_run, wait_finished

from ferryman_worker import logs


def test_a_faulty_run_logs_json_lines_with_ids_and_no_secret(db_url: str) -> None:
    with (
        faulty_crm() as crm,
        worker_process(
            db_url, "--lanes", "migrations:3", env={"FERRYMAN_LOG_LEVEL": "DEBUG"}
        ) as worker,
    ):
        run_id = start_run(db_url, request(crm.url, page_size=100))
        final = wait_finished(db_url, run_id, timeout=240)
        stats = crm.stats()
        assert worker.stop() == 0
        text = worker.log()
    assert final["state"] == "succeeded", final["error"]
    statuses = {status for calls in stats["requests"].values() for status in calls}
    assert {"429", "404"} <= statuses and statuses & {"500", "502", "503"}, stats  # it was faulty
    assert TOKEN not in text and PASSWORD not in text
    entries = [json.loads(line) for line in text.splitlines()]  # every line is one object
    assert len(entries) > 100  # DEBUG: each source call at least
    assert all({"time", "level", "logger", "message"} <= entry.keys() for entry in entries)
    mine = [e for e in entries if e.get("run_id") == run_id]
    assert any("paused" in e["message"] and "429" in e["message"] for e in mine)
    assert any("is gone from the source" in e["message"] for e in mine)
    assert all(isinstance(e.get("task_id"), int) and isinstance(e.get("job_id"), int) for e in mine)
    started = [e for e in entries if e["message"].startswith("worker ")]
    assert started and "run_id" not in started[0] and "job_id" not in started[0]


def _logger(formatter: logging.Formatter) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logger = logging.getLogger(f"ferryman.test.{id(stream)}")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, stream


def test_text_lines_carry_the_ids_and_json_keeps_the_traceback() -> None:
    logger, stream = _logger(logs.TextFormatter())
    with logs.ids(run_id=7, task_id=70, job_id=700):
        logger.info("window written")
    logger.info("between jobs")
    first, second = stream.getvalue().splitlines()
    assert first.endswith(": window written [run=7 task=70 job=700]")
    assert second.endswith(": between jobs")
    logger, stream = _logger(logs.JsonFormatter())
    try:
        raise ValueError("bad value")
    except ValueError:
        logger.exception("it failed")
    entry = json.loads(stream.getvalue())
    assert entry["level"] == "ERROR" and entry["message"] == "it failed"
    assert (
        entry["exception"].startswith("Traceback") and "ValueError: bad value" in entry["exception"]
    )
    assert entry["time"].endswith("Z") and "run_id" not in entry
    ref = {"kind": "MigrationRun", "namespace": "team-a", "name": "acme-crm", "uid": "u"}
    logger.info("admitted", extra={"k8s_ref": ref})  # as kopf's per-object logger does
    assert json.loads(stream.getvalue().splitlines()[-1])["object"] == "team-a/acme-crm"


def test_the_format_defaults_to_text_on_a_terminal_and_json_elsewhere() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert logs.default_format(Terminal()) == "text"
    assert logs.default_format(io.StringIO()) == "json"


def _ferryman(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("FERRYMAN_LOG")}
    return subprocess.run(
        [sys.executable, "-m", "ferryman_worker.cli", *args],
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_refused_setting_is_one_json_line_off_a_terminal_and_plain_text_when_asked() -> None:
    url = f"postgresql://ferry:{PASSWORD}@127.0.0.1:1/nowhere"
    refused = _ferryman("worker", "--lanes", "migrations:0", FERRYMAN_DATABASE_URL=url)
    assert refused.returncode == 2
    (line,) = refused.stderr.splitlines()  # stderr is a pipe: json by default
    entry = json.loads(line)
    assert entry["level"] == "ERROR" and "needs at least 1" in entry["message"]
    text = _ferryman(
        "worker", "--lanes", "migrations:0", FERRYMAN_DATABASE_URL=url, FERRYMAN_LOG_FORMAT="text"
    )
    assert text.returncode == 2 and text.stderr.startswith("ferryman: lanes 'migrations:0'")
    bad = _ferryman("jobs", FERRYMAN_LOG_FORMAT="xml")
    assert bad.returncode == 2 and "log_format (FERRYMAN_LOG_FORMAT)" in bad.stderr
    assert PASSWORD not in refused.stderr + text.stderr
