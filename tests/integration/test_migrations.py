"""Schema migrations against a real PostgreSQL."""

from __future__ import annotations

import pathlib
import subprocess
import threading

import pytest

from ferryman_worker.db import connect, databases, migrate

SCHEMA = (pathlib.Path(migrate.__file__).parent / "sql" / "schema.sql").read_text()


def _pg_dump() -> str:
    import pgserver

    return str(pathlib.Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_dump")


def _schema_dump(url: str) -> str:
    out = subprocess.run(
        [
            _pg_dump(),
            "--schema-only",
            "--no-owner",
            "--exclude-table",
            "ferryman_schema_migrations",
            "-d",
            url,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    lines = [
        line
        for line in out.splitlines()
        if line
        and not line.startswith("--")
        and not line.startswith("SET ")
        and "pg_catalog.set_config" not in line
        and not line.startswith("\\")
    ]
    return "\n".join(lines)


def _fresh_db(admin_url: str, name: str) -> str:
    databases.drop(admin_url, name)
    return databases.create(admin_url, name)


def test_migrating_a_fresh_database_equals_the_schema_file(pg_admin_url: str) -> None:
    migrated = _fresh_db(pg_admin_url, "mig_migrated")
    from_schema = _fresh_db(pg_admin_url, "mig_schema")
    with connect.connect(migrated) as conn:
        applied = migrate.migrate(conn)
    with connect.connect(from_schema) as conn:
        conn.execute(SCHEMA)  # type: ignore[arg-type]
    assert [m.version for m in applied] == [m.version for m in migrate.available()]
    assert _schema_dump(migrated) == _schema_dump(from_schema)
    assert "CREATE TABLE public.ferryman_jobs" in _schema_dump(migrated)


def test_migrate_twice_applies_nothing_the_second_time(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        assert migrate.migrate(conn) == []
        assert all(state.applied_at is not None for state in migrate.status(conn))
        migrate.check_current(conn)


def test_concurrent_migrations_apply_each_file_once(pg_admin_url: str) -> None:
    url = _fresh_db(pg_admin_url, "mig_concurrent")
    results: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with connect.connect(url) as conn:
                results.append(len(migrate.migrate(conn)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(results) == [0, 0, 0, len(migrate.available())]


def test_a_pending_migration_is_reported(pg_admin_url: str) -> None:
    url = _fresh_db(pg_admin_url, "mig_pending")
    with connect.connect(url) as conn:
        states = migrate.status(conn)
        assert states and all(state.applied_at is None for state in states)
        try:
            migrate.check_current(conn)
        except migrate.MigrationError as exc:
            assert "ferryman db migrate" in str(exc)
        else:
            raise AssertionError("check_current accepted an unmigrated database")
        created = conn.execute(  # checking only reads: only migrate creates the bookkeeping
            "SELECT to_regclass('ferryman_schema_migrations') AS own,"
            " to_regclass('ferryman_plugin_migrations') AS plugins"
        ).fetchone()
        assert created == {"own": None, "plugins": None}
        migrate.migrate(conn)
        migrate.check_current(conn)


PLUGIN = {"fakecrm": "ferryman_fakeplugin.migrations"}


def test_a_plugins_migrations_run_after_ferrymans_and_are_recorded_per_plugin(
    db_url: str,
) -> None:
    with connect.connect(db_url) as conn:  # ferryman's own are applied already
        with pytest.raises(migrate.MigrationError, match="fakecrm/0001_widgets"):
            migrate.check_current(conn, PLUGIN)
        applied = migrate.migrate(conn, PLUGIN)
        assert [m.label for m in applied] == ["fakecrm/0001_widgets", "fakecrm/0002_colour"]
        conn.execute(
            "INSERT INTO fake_widgets (workspace, source_id, name, colour)"
            " VALUES ('acme', 1, 'w', 'red')"
        )
        assert migrate.migrate(conn, PLUGIN) == []
        migrate.check_current(conn, PLUGIN)
        states = {state.migration.label: state.applied_at for state in migrate.status(conn, PLUGIN)}
        assert all(states.values()) and "fakecrm/0002_colour" in states
        recorded = conn.execute(
            "SELECT plugin, version, name FROM ferryman_plugin_migrations ORDER BY version"
        ).fetchall()
    assert [tuple(r.values()) for r in recorded] == [
        ("fakecrm", 1, "widgets"),
        ("fakecrm", 2, "colour"),
    ]


def test_a_failing_plugin_migration_is_rolled_back_and_named(db_url: str) -> None:
    with connect.connect(db_url) as conn:
        conn.execute("CREATE TABLE fake_widgets (id int)")  # 0001 will collide with it
        with pytest.raises(migrate.MigrationError, match="fakecrm/0001_widgets failed"):
            migrate.migrate(conn, PLUGIN)
        assert conn.execute("SELECT to_regproc('fake_write_widgets') AS f").fetchone() == {
            "f": None
        }


def test_batches_in_flight_across_0008_keep_their_totals_and_finish_once(
    pg_admin_url: str,
) -> None:
    """0008 replaces membership rows by the jobs' status: a batch live during the upgrade keeps
    its total (counted from its jobs), and finishes once its last member ends after it."""
    url = _fresh_db(pg_admin_url, "mig_batches")
    before = [m for m in migrate.available() if m.version < 8]
    after = [m for m in migrate.available() if m.version == 8]
    with connect.connect(url) as conn:
        for migration in before:
            conn.execute(migration.sql)  # type: ignore[arg-type]
        batch_id = conn.execute(
            "INSERT INTO ferryman_batches (sealed_at) VALUES (now()) RETURNING id"
        ).fetchone()["id"]  # type: ignore[index]
        ids = [
            conn.execute(
                "INSERT INTO ferryman_jobs (queue, name, batch_id) VALUES ('q', 'j', %s)"
                " RETURNING id",
                (batch_id,),
            ).fetchone()["id"]  # type: ignore[index]
            for _ in range(3)
        ]
        conn.execute(
            "INSERT INTO ferryman_batch_members SELECT %s, unnest(%s::bigint[])", (batch_id, ids)
        )
        conn.execute("UPDATE ferryman_jobs SET status = 'succeeded' WHERE id = %s", (ids[0],))
        conn.execute("DELETE FROM ferryman_batch_members WHERE job_id = %s", (ids[0],))
        for migration in after:
            conn.execute(migration.sql)  # type: ignore[arg-type]

        def finish() -> bool:
            row = conn.execute("SELECT ferryman_finish_batch(%s) AS f", (batch_id,)).fetchone()
            return bool(row and row["f"])

        conn.execute("UPDATE ferryman_jobs SET status = 'failed' WHERE id = %s", (ids[1],))
        assert not finish()  # ids[2] is still ready: live
        conn.execute("UPDATE ferryman_jobs SET status = 'succeeded' WHERE id = %s", (ids[2],))
        assert finish()
        assert not finish()
        row = conn.execute(
            "SELECT total_jobs, completed_jobs, failed_jobs FROM ferryman_batches WHERE id = %s",
            (batch_id,),
        ).fetchone()
    assert row == {"total_jobs": 3, "completed_jobs": 2, "failed_jobs": 1}
