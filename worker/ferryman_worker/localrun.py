"""``ferryman run run.yaml``: a migration run without Kubernetes.

Reads the same MigrationRun YAML ``kubectl apply`` takes (validated by the same model), admits
the run (or finds it, to resume), runs an in-process capsule and the reaper's engine sweeps on a
timer, and shows live progress until the run ends. Ctrl-C suspends the run and stops cleanly;
running the same command again resumes it from its checkpoints.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import shlex
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

from ferryman_worker import console, contract, eta, providers, reaper
from ferryman_worker.db import connect, migrate
from ferryman_worker.engine import causes, runs
from ferryman_worker.engine import tasks as _tasks  # noqa: F401  (registers the task job)
from ferryman_worker.engine.runtime import RESOURCE, EngineRuntime
from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import declarative
from ferryman_worker.queue.worker import Worker
from ferryman_worker.settings import Settings

LOCAL_REAP_INTERVAL = 30.0
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def lane_width(settings: Settings) -> int:
    """Width of the ``migrations`` lane, where task jobs run."""
    from ferryman_worker.engine.schedule import LANE

    for spec in settings.lane_specs:
        if spec.name == LANE:
            return spec.width
    raise ConfigurationError(
        f"lanes {settings.lanes!r} have no {LANE!r} lane, where migration "
        f"tasks run: add one, e.g. '{LANE}:4'"
    )


def run_file(
    path: str,
    database: Callable[[], str],
    settings: Settings,
    out: TextIO = sys.stdout,
    provider_file: str | None = None,
) -> int:
    """Run (or resume) the MigrationRun in ``path`` to its end; returns the exit code. The file,
    the provider file (a declarative provider, snapshotted into the run when it is admitted),
    the lanes and the credential are checked before ``database()`` (which may start a server)."""
    spec = contract.load_run_file(path)
    definition = _provider_definition(provider_file, spec)
    width = lane_width(settings)
    mapping = mapping_file(path, spec)
    runtime = EngineRuntime(
        settings.credentials_dir,
        settings.source_timeout,
        settings.sync_windows,
        max_response_bytes=settings.source_max_response_bytes,
        destinations=settings.destinations,
        max_pages=settings.source_max_pages,
    )
    request = contract.request_for(spec, width, mapping, destinations=settings.destinations)
    style = providers.resolve(spec.spec.source.provider, definition).auth
    credential = runtime.credential(  # missing: say so, admit nothing
        {"credential": request.credential, "base_url": request.base_url}, style
    )
    runtime.client(request.base_url, credential, style)  # e.g. a token URL on an unbound host
    url = runtime.database_url = database()
    with connect.connect(url) as conn:
        migrate.migrate(conn)
        _admit_or_resume(conn, spec, width, mapping, settings, out, definition)
        worker = Worker(settings, url, resources={RESOURCE: runtime})
        interrupted = threading.Event()
        previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set())
        worker.start()
        try:
            final = _watch(conn, contract.run_key(spec), settings, interrupted, out)
        finally:
            signal.signal(signal.SIGINT, previous)
            worker.stop()
            runtime.close()
        return _report(conn, final, interrupted.is_set(), path, command(settings), out)


def _provider_definition(
    provider_file: str | None, spec: contract.MigrationRun
) -> dict[str, Any] | None:
    """The declarative provider in ``provider_file``, checked against the run's
    ``spec.source.provider``; None without a file."""
    if provider_file is None:
        return None
    provider = declarative.load_file(provider_file)
    definition = provider.definition()
    declarative.from_definition(spec.spec.source.provider, definition)  # the names agree
    return definition


def mapping_file(path: str, spec: contract.MigrationRun) -> dict[str, Any] | None:
    """The mapping ``spec.mapping.file`` names (relative to the run file), validated; None if
    the spec names none."""
    if spec.spec.mapping is None:
        return None
    if spec.spec.mapping.file is None:
        raise ConfigurationError(
            f"spec.mapping.name: {spec.spec.mapping.name!r} names a MigrationMapping, which "
            "the operator reads on Kubernetes; `ferryman run` reads a file: use spec.mapping.file"
            " with the mapping YAML's path (relative to the run file) instead"
        )
    from ferryman_worker.destinations import mapping

    found = pathlib.Path(path).parent / spec.spec.mapping.file
    return mapping.dump(mapping.load_file(found))


def _admit_or_resume(
    conn: connect.Connection,
    spec: contract.MigrationRun,
    width: int,
    mapping: dict[str, Any] | None,
    settings: Settings,
    out: TextIO,
    definition: dict[str, Any] | None = None,
) -> None:
    name = contract.run_key(spec)
    existing = runs.by_name(conn, name)
    if existing is None:
        run_id = contract.admit(
            conn,
            spec,
            width,
            mapping,
            provider_definition=definition,
            destinations=settings.destinations,
        )
        print(f"run {name} admitted (id {run_id})", file=out)
        return
    run_id = int(existing["id"])
    if existing["state"] == "running":
        reaper.sweep_engine(conn, settings.stale_claim_after)  # dead claims of a killed process
        runs.resume(conn, run_id)
        print(f"run {name} resumed from its checkpoints", file=out)


def _watch(
    conn: connect.Connection,
    name: str,
    settings: Settings,
    interrupted: threading.Event,
    out: TextIO,
) -> contract.RunProgress:
    """Redraw the progress until the run ends or Ctrl-C; sweep like the reaper meanwhile."""
    tty = out.isatty()
    drawn = 0
    last_reap = last_print = datetime.datetime.now(datetime.UTC)
    while True:
        now = datetime.datetime.now(datetime.UTC)
        run = contract.progress(conn, name)[0]
        progress = runs.kind_progress(conn, run.id)
        estimate = eta.read(conn, run.id, progress)
        lines = [
            console.headline(run, now),
            *console.kind_lines(progress, run.phase_index, now),
            *(console.eta_lines(estimate) if estimate is not None else []),
        ]
        failing = runs.retrying(conn, run.id)
        retrying = [causes.retrying_line(failing, now)] if failing is not None else []
        if tty:  # redrawn in place: a line must not wrap, or the cursor lands wrong
            width = shutil.get_terminal_size().columns - 1
            out.write(f"\x1b[{drawn}F\x1b[J" if drawn else "")
            out.write("\n".join(line[:width] for line in [*lines, *retrying]) + "\n")
            drawn = len(lines) + len(retrying)
        elif (now - last_print).total_seconds() >= 5 and not run.state.finished:
            out.write("\n".join([lines[0], *retrying]) + "\n")
            last_print = now
        out.flush()
        if run.state.finished:
            return run
        if interrupted.wait(0.5):
            runs.suspend(conn, run.id)
            return contract.progress(conn, name)[0]
        if (now - last_reap).total_seconds() >= min(LOCAL_REAP_INTERVAL, settings.reap_interval):
            reaper.sweep_engine(conn, settings.stale_claim_after)
            last_reap = now


def command(settings: Settings) -> str:
    """How to call ferryman again from the same shell, to paste: this executable as it was
    called (``ferryman`` if that is what PATH finds), and, for an embedded server in a folder
    of its own, that folder (never a database URL: it may hold a password)."""
    invoked = sys.argv[0]
    if os.path.basename(invoked) == "ferryman":
        found = shutil.which("ferryman")
        same = found is not None and os.path.realpath(found) == os.path.realpath(invoked)
        program = "ferryman" if same else shlex.quote(invoked)
    else:  # python -m ferryman_worker.cli, or a test
        program = f"{shlex.quote(sys.executable)} -m ferryman_worker.cli"
    if settings.database_url is None and settings.embedded_dir:
        folder = shlex.quote(os.path.abspath(settings.embedded_dir))
        return f"FERRYMAN_EMBEDDED_DIR={folder} {program}"
    return program


def _report(
    conn: connect.Connection,
    run: contract.RunProgress,
    interrupted: bool,
    path: str,
    ferryman: str,
    out: TextIO,
) -> int:
    now = datetime.datetime.now(datetime.UTC)
    final = contract.progress(conn, run.name)[0]
    kinds = runs.kind_progress(conn, final.id)
    print("\n".join(console.summary(final, kinds, now, ferryman)), file=out)
    if interrupted and not final.state.finished:
        print(f"suspended: run `{ferryman} run {path}` again to resume", file=out)
        return EXIT_INTERRUPTED
    if final.state is contract.RunState.FAILED:
        print(
            f"failed: once the cause is fixed, `{ferryman} retry {final.name}` reopens it from"
            f" its checkpoints, and `{ferryman} run {path}` runs it here again",
            file=out,
        )
    return EXIT_OK if final.state is contract.RunState.SUCCEEDED else EXIT_FAILED
