"""The ``ferryman`` command against a real database."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import ferryman_testjobs as tj
from psycopg import conninfo

from ferryman_worker.db import connect, databases
from ferryman_worker.queue import batch, enqueue_many

SUPPORT = pathlib.Path(tj.__file__).parent


def ferryman(
    db_url: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {
        **os.environ,
        "FERRYMAN_DATABASE_URL": db_url,
        "PYTHONPATH": str(SUPPORT),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "ferryman_worker.cli", *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_db_migrate_and_status_on_a_new_database(pg_admin_url: str, db_url: str) -> None:
    databases.drop(pg_admin_url, "cli_new")
    url = databases.create(pg_admin_url, "cli_new")
    assert "pending" in ferryman(url, "db", "status").stdout
    for command in (["status"], ["errors", "default/run"], ["jobs"], ["reap"]):
        refused = ferryman(url, *command)
        assert refused.returncode == 2, command
        assert "schema is not up to date" in refused.stderr, command
        assert "run `ferryman db migrate`" in refused.stderr and "Traceback" not in refused.stderr
    first = ferryman(url, "db", "migrate")
    assert first.returncode == 0 and "applied 0001_capsule" in first.stdout
    assert "0 migration(s) applied" in ferryman(url, "db", "migrate").stdout
    assert "pending" not in ferryman(url, "db", "status").stdout


def test_jobs_counts_failed_retry_discard_and_batches(
    conn: connect.Connection, db_url: str
) -> None:
    with batch(conn=conn, source="cli"):
        ids = enqueue_many([tj.record.call(n=i) for i in range(3)], conn=conn)
    conn.execute(
        "UPDATE ferryman_jobs SET status = 'failed', last_error = 'RuntimeError: boom'"
        " WHERE id = %s",
        (ids[0],),
    )
    counts = ferryman(db_url, "jobs").stdout.splitlines()
    assert counts[0].split() == ["QUEUE", "READY", "RUNNING", "SCHEDULED", "FAILED", "SUCCEEDED"]
    assert counts[1].split() == ["default", "2", "0", "0", "1", "0"]
    failed = ferryman(db_url, "jobs", "failed").stdout
    assert "RuntimeError: boom" in failed and str(ids[0]) in failed
    assert "1 failed job(s) put back" in ferryman(db_url, "jobs", "retry", str(ids[0])).stdout
    conn.execute("UPDATE ferryman_jobs SET status = 'failed' WHERE id = %s", (ids[1],))
    assert "1 failed job(s) discarded" in ferryman(db_url, "jobs", "discard", "--all").stdout
    batches = ferryman(db_url, "jobs", "batches").stdout.splitlines()
    # id, total, completed, failed (the discarded member), pending (the two ready members)
    assert batches[1].split()[:5] == ["1", "3", "0", "1", "2"]
    refused = ferryman(db_url, "jobs", "retry")
    assert refused.returncode == 2 and "give job ids, or --all" in refused.stderr


def test_reap_prints_what_each_sweep_did(db_url: str) -> None:
    result = ferryman(db_url, "reap")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "tasks whose job failed for good: 0 task(s) failed",
        "dead or stale task claims: 0 task(s) released",
        "runs whose heartbeat stopped: 0 run(s) stalled, 0 task(s) that had lost their job"
        " requeued",
    ]
    assert "stalled batches: 0 sealed, 0 finished" in lines
    assert any(line.startswith("prune: 0 job(s)") for line in lines)


def test_bad_configuration_exits_2_with_the_message_and_no_secret(db_url: str) -> None:
    secret_url = "postgresql://ferry:s3cret-pw@127.0.0.1:1/nowhere"
    lanes = ferryman(secret_url, "worker", "--lanes", "migrations:0")
    assert lanes.returncode == 2 and "needs at least 1" in lanes.stderr
    pool = ferryman(secret_url, "worker", "--lanes", "a:8", "--pool-size", "3")
    assert pool.returncode == 2 and "pool_size 3 is too small" in pool.stderr
    missing = ferryman(db_url, "worker", "--import", "no_such_module_here")
    assert missing.returncode == 2 and "--import no_such_module_here" in missing.stderr
    unreachable = ferryman(secret_url, "db", "status")
    assert unreachable.returncode == 2 and "cannot connect to PostgreSQL" in unreachable.stderr
    for result in (lanes, pool, missing, unreachable):
        assert "s3cret-pw" not in result.stderr + result.stdout


def test_a_commands_refusal_is_text_for_its_user_and_a_services_is_a_log_line(
    db_url: str, tmp_path: pathlib.Path
) -> None:
    bad = tmp_path / "provider.yaml"
    bad.write_text("name: x\n")
    check = ferryman(db_url, "provider", "check", str(bad))  # stderr is a pipe, not a terminal
    assert check.returncode == 2
    assert check.stderr.startswith("ferryman: ") and "metadata: required" in check.stderr
    assert '"level"' not in check.stderr
    service = ferryman(db_url, "worker", "--lanes", "migrations:0")
    assert service.returncode == 2
    assert '"level": "ERROR"' in service.stderr and "needs at least 1" in service.stderr


def test_db_shell_runs_psql_on_the_database_with_the_password_kept_off_its_command_line(
    db_url: str, tmp_path: pathlib.Path
) -> None:
    script = tmp_path / "app.sql"
    script.write_text("CREATE TABLE app_companies (id bigserial PRIMARY KEY, name text);\n")
    made = ferryman(db_url, "db", "shell", "--", "-v", "ON_ERROR_STOP=1", "-f", str(script))
    assert made.returncode == 0, made.stderr
    shown = ferryman(db_url, "db", "shell", "--", "-At", "-c", "SELECT current_database()")
    assert shown.returncode == 0
    assert shown.stdout.strip() == conninfo.conninfo_to_dict(db_url)["dbname"]
    with connect.connect(db_url) as conn:
        made_table = conn.execute("SELECT to_regclass('app_companies') IS NOT NULL AS ok")
        assert made_table.fetchone() == {"ok": True}
    failed = ferryman(db_url, "db", "shell", "--", "-v", "ON_ERROR_STOP=1", "-c", "SELECT nope")
    assert failed.returncode != 0 and 'column "nope" does not exist' in failed.stderr


def test_reap_prunes_finished_jobs_past_the_retention(
    conn: connect.Connection, db_url: str
) -> None:
    ids = enqueue_many([tj.record.call(n=i) for i in range(4)], conn=conn)
    conn.execute(
        "UPDATE ferryman_jobs SET status = 'succeeded',"
        " finished_at = now() - interval '4 days' WHERE id = ANY(%s)",
        (ids[:2],),
    )
    conn.execute(
        "UPDATE ferryman_jobs SET status = 'failed', finished_at = now() - interval"
        " '4 days' WHERE id = %s",
        (ids[2],),
    )
    result = ferryman(db_url, "reap", env={"FERRYMAN_RETENTION_HOURS": "72"})
    assert "prune: 2 job(s)" in result.stdout
    left = [r["id"] for r in conn.execute("SELECT id FROM ferryman_jobs ORDER BY id")]
    assert left == ids[2:]  # failed jobs stay for inspection; ready ones are untouched
