"""``ferryman``: the one console script. Each sub-command is a short function that reads the
settings once, resolves the database, and calls into the package."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from ferryman_worker import __version__, logs, providertool
from ferryman_worker.errors import FerrymanError
from ferryman_worker.settings import Settings, load, load_logging

if TYPE_CHECKING:  # psycopg is imported by the commands that use it, not by --help
    from ferryman_worker.db.connect import Connection

log = logging.getLogger("ferryman")

Handler = Callable[[argparse.Namespace, Settings], int]


def database_url(settings: Settings) -> str:
    """FERRYMAN_DATABASE_URL, or the embedded server's ``ferryman`` database: started here if it
    is not running, and stopped when the last ``ferryman`` process using it exits."""
    if settings.database_url is not None:
        return settings.database_url.get_secret_value()
    from ferryman_worker.db import databases, embedded

    server = embedded.start(settings.embedded_dir, cleanup="stop")
    log.info("FERRYMAN_DATABASE_URL is unset: using the embedded PostgreSQL in %s", server.data_dir)
    return databases.create(server.url(), "ferryman", exist_ok=True)


def current_database(settings: Settings) -> Connection:
    """A connection to the database, whose schema must be up to date: MigrationError (naming
    `ferryman db migrate`) rather than a missing table's traceback."""
    from ferryman_worker.db import connect, migrate

    conn = connect.connect(database_url(settings))
    try:
        migrate.check_current(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _run_id(conn: Connection, command: str, name: str) -> int:
    """The id of the run called ``name``; the command's error if there is none."""
    from ferryman_worker.engine import runs

    row = runs.by_name(conn, name)
    if row is None:
        raise _no_run(command, name)
    return int(row["id"])


def _no_run(command: str, name: str) -> FerrymanError:
    return FerrymanError(f"{command}: no run named {name!r} (use namespace/name)")


# -- sub-commands --------------------------------------------------------------------------------


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from ferryman_worker.db import connect, migrate
    from ferryman_worker.engine import tasks  # noqa: F401  (registers the migration task job)
    from ferryman_worker.engine.runtime import RESOURCE
    from ferryman_worker.queue import worker

    worker.import_modules(settings.imports)
    url = database_url(settings)
    if args.migrate:
        with connect.connect(url) as conn:
            migrate.migrate(conn)
    runtime = _runtime(settings, url)
    try:
        serving = worker.Worker(settings, url, resources={RESOURCE: runtime})
        worker.settle_heap()
        return serving.run_until_signal()
    finally:
        runtime.close()


DESTINATION_FLAGS = ("destination_schemas", "destination_tables", "destination_unscoped")


def _add_destinations(parser: argparse.ArgumentParser) -> None:
    """Where mappings may write (FERRYMAN_DESTINATION_*, which these flags override)."""
    parser.add_argument(
        "--destination-schemas",
        metavar="LIST",
        help="schemas whose tables mappings may write, comma-separated (default: public)",
    )
    parser.add_argument(
        "--destination-tables",
        metavar="LIST",
        help="tables (schema.table) mappings may write besides, comma-separated",
    )
    parser.add_argument(
        "--destination-unscoped",
        action="store_true",
        default=None,
        help="let mappings write tables without a workspace column (single-tenant only)",
    )


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from ferryman_worker import localrun

    return localrun.run_file(
        args.file, lambda: database_url(settings), settings, provider_file=args.provider_file
    )


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    import datetime

    from ferryman_worker import console, contract, eta
    from ferryman_worker.engine import causes, runs

    now = datetime.datetime.now(datetime.UTC)
    with current_database(settings) as conn:
        found = contract.progress(conn, args.run)
        if args.run is not None and not found:
            raise _no_run("status", args.run)
        for run in found:
            progress = runs.kind_progress(conn, run.id)
            print("\n".join(console.summary(run, progress, now)))
            estimate = eta.read(conn, run.id, progress)
            if estimate is not None:
                print("\n".join(console.eta_lines(estimate)))
            retrying = runs.retrying(conn, run.id)
            if retrying is not None:
                print(causes.retrying_line(retrying, now))
        if not found:
            print("no runs")
    return 0


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    import datetime
    import pathlib

    from ferryman_worker import report

    with current_database(settings) as conn:
        found = report.build(conn, args.run, datetime.datetime.now(datetime.UTC))
    rendered = report.render(found, args.format)
    if args.output is None:
        sys.stdout.write(rendered)
    else:
        pathlib.Path(args.output).write_text(rendered, encoding="utf-8")
        print(f"wrote the {args.format} report of {args.run} to {args.output}")
    return 0


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    from ferryman_worker import console
    from ferryman_worker.engine import verification, verify
    from ferryman_worker.engine.source import SourceError

    with current_database(settings) as conn:
        run_id = _run_id(conn, "verify", args.run)
        verification.request(conn, run_id, "cli", queue=args.queue)
        if args.queue:
            print(
                f"run {args.run}: verification queued; a worker with the migrations lane does"
                f" it (`ferryman status {args.run}` shows it)"
            )
            return 0
        runtime = _runtime(settings, database_url(settings))
        try:
            verify.run(conn, run_id, runtime)
        except SourceError as exc:  # the source could not be listed: the verification failed
            verify.fail(conn, run_id, exc)
        except BaseException as exc:
            verify.fail(conn, run_id, exc if isinstance(exc, Exception) else Exception("stopped"))
            raise
        finally:
            runtime.close()
        found = verification.read(conn, run_id)
    print("\n".join(console.verification_lines(found)))
    return 0 if found is not None and found.verdict == "verified" else 1


def _runtime(settings: Settings, url: str) -> Any:
    """The engine's runtime as ``ferryman worker`` builds it from the settings."""
    from ferryman_worker.engine.runtime import EngineRuntime

    return EngineRuntime(
        settings.credentials_dir,
        settings.source_timeout,
        settings.sync_windows,
        settings.sealing_key_file,
        database_url=url,
        local_credentials=settings.local_credentials,
        max_response_bytes=settings.source_max_response_bytes,
        destinations=settings.destinations,
        max_pages=settings.source_max_pages,
    )


def cmd_errors(args: argparse.Namespace, settings: Settings) -> int:
    from ferryman_worker.engine import runs

    with current_database(settings) as conn:
        rows = runs.row_errors(conn, _run_id(conn, "errors", args.run), args.kind, args.limit)
    _table(rows, ["kind", "source_id", "at", "reason"], whole="reason")
    total = int(rows[0]["total"]) if rows else 0
    if total > len(rows):
        print(f"{len(rows)} of {total} shown: --limit {total} shows them all")
    return 0


def cmd_retry(args: argparse.Namespace, settings: Settings) -> int:
    from ferryman_worker.engine import runs

    with current_database(settings) as conn:
        reopened = runs.retry(conn, _run_id(conn, "retry", args.run))
    print(
        f"run {args.run} reopened: {reopened} unfinished task(s) queued again from their"
        " checkpoints; a worker with the migrations lane takes them (or `ferryman run FILE`)"
    )
    return 0


def cmd_db(args: argparse.Namespace, settings: Settings) -> int:
    from ferryman_worker.db import connect, migrate, shell

    if args.db_command == "shell":
        return shell.run(database_url(settings), args.psql_args)
    with connect.connect(database_url(settings)) as conn:
        if args.db_command == "migrate":
            applied = migrate.migrate(conn)
            for m in applied:
                print(f"applied {m.label}")
            print(f"{len(applied)} migration(s) applied; schema is up to date")
        else:
            for state in migrate.status(conn):
                when = (
                    state.applied_at.isoformat(timespec="seconds")
                    if state.applied_at
                    else "pending"
                )
                print(f"{state.migration.label:<34} {when}")
    return 0


def cmd_jobs(args: argparse.Namespace, settings: Settings) -> int:
    from ferryman_worker.queue import admin

    ids = None if args.all else args.ids
    with current_database(settings) as conn:
        action = args.jobs_command or "counts"
        if action in ("retry", "discard") and not args.all and not args.ids:
            raise FerrymanError(f"jobs {action}: give job ids, or --all")
        if action == "counts":
            _table(
                admin.queue_counts(conn),
                ["queue", "ready", "running", "scheduled", "failed", "succeeded"],
            )
        elif action == "failed":
            _table(
                admin.failed_jobs(conn, args.limit),
                ["id", "queue", "name", "attempts", "finished_at", "last_error"],
            )
        elif action == "retry":
            print(f"{admin.retry_failed(conn, ids)} failed job(s) put back on their queues")
        elif action == "discard":
            print(f"{admin.discard_failed(conn, ids)} failed job(s) discarded")
        elif action == "batches":
            _table(
                admin.batches(conn, args.limit),
                ["id", "total", "completed", "failed", "pending", "created_at", "finished_at"],
            )
    return 0


def cmd_reap(args: argparse.Namespace, settings: Settings) -> int:
    from ferryman_worker import reaper

    with current_database(settings) as conn:
        for line in reaper.reap(conn, settings):
            print(line)
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from ferryman_worker import demo

    return demo.run_queue_demo(database_url(settings), settings, jobs=args.jobs)


# -- parser --------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ferryman",
        description="Move a SaaS source's data into PostgreSQL, exactly once. Settings come from "
        "FERRYMAN_* environment variables; FERRYMAN_DATABASE_URL unset means an embedded server.",
    )
    parser.add_argument("--version", action="version", version=f"ferryman {__version__}")
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="DEBUG, INFO, WARNING or ERROR (FERRYMAN_LOG_LEVEL; default INFO); the format is "
        "FERRYMAN_LOG_FORMAT: json or text (default: text on a terminal, json otherwise)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_worker(commands)
    _add_db(commands)
    _add_jobs(commands)
    _add_mapping(commands)
    run = commands.add_parser(
        "run",
        help="run (or resume) a MigrationRun YAML without Kubernetes",
        description="Run (or resume) a MigrationRun YAML without Kubernetes: an in-process worker "
        "and reaper, live progress, then a summary. Ctrl-C suspends the run; the same command "
        "resumes it from its checkpoints. Exit status: 0 succeeded, 1 failed or cancelled, "
        "130 suspended by Ctrl-C, 2 bad input.",
    )
    run.add_argument("file", help="a MigrationRun YAML, the same kubectl apply takes")
    run.add_argument("--lanes", help="lanes of the in-process capsule (needs 'migrations')")
    run.add_argument(
        "--provider-file",
        metavar="FILE",
        help="a declarative provider YAML whose metadata.name is the run's spec.source.provider; "
        "it is snapshotted into the run when admitted (a resumed run keeps that definition)",
    )
    run.add_argument(
        "--source-max-pages",
        type=int,
        metavar="N",
        help="pages a listing may have when its kind declares no maxPages; past it the run "
        "fails (default 100000; FERRYMAN_SOURCE_MAX_PAGES)",
    )
    _add_destinations(run)
    run.set_defaults(handler=cmd_run)
    status = commands.add_parser("status", help="progress of every run, or of one")
    status.add_argument("run", nargs="?", help="namespace/name of the run (default: all)")
    status.set_defaults(handler=cmd_status)
    report_ = commands.add_parser(
        "report",
        help="a run's migration report: per kind, the source's total, listed, written, matched,"
        " skipped, refused by reason, deleted, and its verdict",
        description="The migration report of a run (docs/report.md). --format text for a"
        " terminal, json for machines (schema: docs/report.schema.json), html for one"
        " self-contained page to hand on (no scripts, nothing fetched).",
    )
    report_.add_argument("run", help="namespace/name of the run")
    report_.add_argument(
        "--format", choices=("text", "json", "html"), default="text", help="default: text"
    )
    report_.add_argument("--output", "-o", metavar="FILE", help="write it to FILE, not stdout")
    report_.set_defaults(handler=cmd_report)
    errors = commands.add_parser(
        "errors", help="a run's row errors: the source rows it did not write, and why"
    )
    errors.add_argument("run", help="namespace/name of the run")
    errors.add_argument("--kind", help="only this kind (e.g. people)")
    errors.add_argument(
        "--limit", type=_positive, default=100, help="at most this many, oldest first (default 100)"
    )
    errors.set_defaults(handler=cmd_errors)
    verify = commands.add_parser(
        "verify",
        help="list a finished run's source ids again and compare them with what it imported",
        description="List each kind's ids from the source again (through the run's provider,"
        " credential and rate budget; the ids alone where the provider declares a verifyQuery)"
        " and compare them with the workspace's ledger: ids the source lists that were not"
        " imported (missing), ids imported that the source no longer lists (gone), with the"
        " first of each. The result is kept with the run (`ferryman status` shows it). Exit"
        " status: 0 verified, 1 differs or failed, 2 bad input.",
    )
    verify.add_argument("run", help="namespace/name of the run")
    verify.add_argument(
        "--queue",
        action="store_true",
        help="hand the verification to the workers (a queue job) instead of doing it here",
    )
    verify.set_defaults(handler=cmd_verify)
    retry = commands.add_parser(
        "retry", help="reopen a failed run from its checkpoints (what it wrote stays written)"
    )
    retry.add_argument("run", help="namespace/name of the run")
    retry.set_defaults(handler=cmd_retry)
    reap = commands.add_parser("reap", help="run the repair sweeps once and print what they did")
    reap.set_defaults(handler=cmd_reap)
    demo = commands.add_parser(
        "demo", help="the capsule alone: a batch of jobs run locally, with a progress bar"
    )
    demo.add_argument("--jobs", type=int, default=2000, help="jobs to run (default 2000)")
    demo.set_defaults(handler=cmd_demo)
    providertool.add_parsers(commands)
    _add_plugins(commands)
    return parser


def _add_plugins(commands: Any) -> None:
    """Sub-commands that other packages register under the ``ferryman.commands`` entry points
    (``ferryman operator`` and ``ferryman crd`` come from ferryman_operator, which this package
    never imports): each entry point is a function that adds its parsers to ``commands``."""
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group="ferryman.commands"), key=lambda e: e.name):
        entry.load()(commands)


def _add_worker(commands: Any) -> None:
    worker = commands.add_parser(
        "worker", help="run the capsule and the migration task job: a thread pool per lane"
    )
    worker.add_argument(
        "--lanes",
        help="lanes as name:threads,... (FERRYMAN_LANES; default "
        "migrations:4,critical:2,default:3); a bare name (no :threads) shares what "
        "--pool-size leaves after the other lanes and 4 own connections",
    )
    worker.add_argument(
        "--pool-size",
        type=int,
        help="DB connections (FERRYMAN_POOL_SIZE; default: lane threads + 4; needed when a "
        "lane has no thread count)",
    )
    worker.add_argument(
        "--import",
        dest="imports",
        action="append",
        metavar="MODULE",
        help="module defining job functions (repeatable; FERRYMAN_IMPORTS)",
    )
    worker.add_argument("--poll-interval", type=float, help="seconds between polls (default 15)")
    worker.add_argument(
        "--metrics-port",
        type=int,
        help="serve GET /metrics, /livez and /readyz on this port (FERRYMAN_METRICS_PORT; "
        "default 0 = off)",
    )
    worker.add_argument("--migrate", action="store_true", help="apply schema migrations first")
    worker.set_defaults(handler=cmd_worker)


def _add_db(commands: Any) -> None:
    db = commands.add_parser("db", help="schema migrations, and psql on the database")
    sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    sub.add_parser("migrate", help="apply pending migrations (safe to run concurrently)")
    sub.add_parser("status", help="list migrations and when they were applied")
    shell = sub.add_parser(
        "shell",
        help="psql on ferryman's database (the embedded one too); arguments after -- go to psql",
    )
    shell.add_argument("psql_args", nargs=argparse.REMAINDER, help="e.g. -- -f schema.sql")
    db.set_defaults(handler=cmd_db)


def _add_mapping(commands: Any) -> None:
    mapping = commands.add_parser(
        "mapping", help="check a mapping against a database, write a sample of it, its schema"
    )
    sub = mapping.add_subparsers(dest="mapping_command", required=True, metavar="ACTION")
    check = sub.add_parser(
        "check", help="check a mapping file against the database's tables: one line a problem"
    )
    sample = sub.add_parser(
        "sample",
        help="write a few records through a mapping in a transaction that is rolled back, and "
        "show the rows it would write (references resolved) and what the database refuses",
    )
    check.add_argument(
        "--provider",
        metavar="FILE",
        help="also check every pointer the mapping reads against the fields this provider (a"
        " provider YAML file, or an installed provider's name) declares",
    )
    for p in (check, sample):
        p.add_argument("file", help="the mapping (YAML)")
        p.add_argument(
            "--database",
            metavar="URL",
            help="the application's database (default: FERRYMAN_DATABASE_URL, or the embedded one)",
        )
    for p in (check, sample):
        _add_destinations(p)
    sample.add_argument(
        "--records",
        metavar="FILE",
        help="JSON {kind: [record, ...]} to write (default: the records that landed in "
        "ferryman_landing for the workspace)",
    )
    sample.add_argument("--workspace", default="sample", help="the workspace written for")
    sample.add_argument("--limit", type=_positive, default=5, help="records per kind (default 5)")
    sub.add_parser("schema", help="print the JSON Schema of a mapping file")
    mapping.set_defaults(handler=cmd_mapping)


def cmd_mapping(args: argparse.Namespace, settings: Settings) -> int:
    from ferryman_worker.db import connect
    from ferryman_worker.destinations import commands, mapping

    if args.mapping_command == "schema":
        return commands.schema(sys.stdout)
    found = mapping.load_file(args.file)
    provider = _provider_of(args.provider) if getattr(args, "provider", None) else None
    with connect.connect(args.database or database_url(settings)) as conn:
        if args.mapping_command == "check":
            return commands.check(conn, found, sys.stdout, provider, settings.destinations)
        if args.records:
            records = commands.records_file(args.records)
        else:
            records = commands.landed(conn, args.workspace, list(found.kinds), args.limit)
        return commands.sample(
            conn,
            found,
            records,
            args.workspace,
            args.limit,
            sys.stdout,
            lambda rows: _table(rows, list(rows[0]) if rows else ["source"]),
            settings.destinations,
        )


def _provider_of(given: str) -> Any:
    """The provider ``--provider`` names: a provider YAML file, else an installed provider."""
    import pathlib

    from ferryman_worker import providers
    from ferryman_worker.providers import declarative

    if pathlib.Path(given).is_file():
        return declarative.load_file(given)
    return providers.load(given)


def _add_jobs(commands: Any) -> None:
    jobs = commands.add_parser("jobs", help="inspect the queue; retry or discard failed jobs")
    sub = jobs.add_subparsers(dest="jobs_command", metavar="ACTION")
    sub.add_parser("counts", help="ready/running/scheduled/failed per queue (the default)")
    for name, text in (
        ("failed", "list failed jobs with their errors"),
        ("batches", "live and recent batches with their counts"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--limit", type=int, default=50)
    for name, text in (
        ("retry", "put failed jobs back on their queue"),
        ("discard", "give up on failed jobs"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("ids", nargs="*", type=int, help="job ids")
        p.add_argument("--all", action="store_true", help="every failed job")
    jobs.set_defaults(handler=cmd_jobs, ids=[], all=False, limit=50)


SERVICES: Final = frozenset({("worker", None), ("reap", None), ("db", "migrate")})
"""The sub-commands that run as services (a Deployment, the reaper CronJob, the migration Job):
their refusals are log lines in the log format; every other command answers a person in text."""


def _is_service(args: argparse.Namespace) -> bool:
    return (args.command, getattr(args, "db_command", None)) in SERVICES


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return int(text)


def _table(rows: Sequence[dict[str, Any]], columns: list[str], whole: str | None = None) -> None:
    """Rows as aligned columns; cells are cut at 80 characters, except column ``whole``."""
    cells = [[_cell(row.get(c), c == whole) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    if not rows:
        print("(none)")


def _cell(value: Any, whole: bool = False) -> str:
    if value is None:
        return "-"
    if hasattr(value, "isoformat"):
        return str(value.isoformat(timespec="seconds"))
    text = str(value).replace("\n", " ")
    return text if whole else text[:80]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        log_settings = load_logging(args.log_level)
    except FerrymanError as exc:
        print(f"ferryman: {exc}", file=sys.stderr)
        return 2
    fmt = logs.configure(log_settings.log_level, log_settings.log_format)
    try:
        settings = load(
            **{
                k: getattr(args, k, None)
                for k in (
                    "lanes",
                    "pool_size",
                    "imports",
                    "poll_interval",
                    "metrics_port",
                    "source_max_pages",
                    *DESTINATION_FLAGS,
                )
            }
        )
        handler: Handler = args.handler
        return handler(args, settings)
    except FerrymanError as exc:
        _refuse(exc, fmt if _is_service(args) else "text")
        return 2


def _refuse(exc: FerrymanError, fmt: logs.Format) -> None:
    """Bad input: the field and the fix, as plain text for a person; a service (whose stderr is
    a pod's log) writes it as one JSON object in ``json``."""
    if fmt == "json":
        log.error("%s", exc)
    else:
        print(f"ferryman: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
