"""Logging for every ``ferryman`` sub-command, configured in one place (``configure``).

Two formats: ``text`` (one readable line, for a terminal) and ``json`` (one JSON object per line,
for a log collector: ``time``, ``level``, ``logger``, ``message``, the ``run_id``, ``task_id``
and ``job_id`` that apply, ``object`` (``namespace/name``) on a kopf handler's lines about a
MigrationRun, ``exception`` with the traceback when there is one). The ids come
from context variables that the queue's runner (the job) and the engine (the run and task) set
around the work they do, so every line logged meanwhile on that thread carries them.

This module formats what others log; it decides nothing and logs no secret of its own. What
callers log must hold no secret either (the database URL, source tokens): ``Settings`` keeps
the URL a ``SecretStr``, the engine logs credential hashes, never tokens.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import logging
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any, Literal, TextIO

Format = Literal["json", "text"]

job_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("job_id", default=None)
run_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("run_id", default=None)
task_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("task_id", default=None)

_IDS = (("run_id", run_id), ("task_id", task_id), ("job_id", job_id))
HANDLER = "ferryman"
"""The name of the one handler ``configure`` installs on the root logger."""
QUIET = ("httpx", "httpcore", "kubernetes.client.rest", "psycopg.pool", "pgserver")
"""Libraries whose INFO lines are one per request or connection: shown at DEBUG only."""


@contextlib.contextmanager
def ids(**values: int | None) -> Iterator[None]:
    """Set ``run_id``, ``task_id`` and/or ``job_id`` for what this thread logs in the block."""
    variables = dict((name, var) for name, var in _IDS)
    tokens = [(variables[name], variables[name].set(value)) for name, value in values.items()]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def default_format(stream: TextIO) -> Format:
    """``text`` on a terminal, ``json`` otherwise (a pod's log, a pipe, a file)."""
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "json"


def configure(
    level: str = "INFO", fmt: Format | None = None, stream: TextIO | None = None
) -> Format:
    """Route every logger of the process to ``stream`` (stderr) in ``fmt``; returns the format.

    In ``json``, uncaught exceptions (of the main thread and of other threads) and Python
    warnings are logged too, so every line the process writes to ``stream`` is one object."""
    stream = stream or sys.stderr
    fmt = fmt or default_format(stream)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.set_name(HANDLER)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER]:
        root.removeHandler(old)  # configured again (a test calling main twice): one handler
    root.addHandler(handler)
    root.setLevel(level.upper())
    quiet = logging.DEBUG if root.level <= logging.DEBUG else logging.WARNING
    for name in QUIET:
        logging.getLogger(name).setLevel(quiet)
    logging.captureWarnings(True)
    if fmt == "json":
        sys.excepthook = _log_uncaught
        threading.excepthook = _log_thread_uncaught
    return fmt


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _utc(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, var in _IDS:
            value = var.get()
            if value is not None:
                entry[name] = value
        obj = _object(record)
        if obj is not None:
            entry["object"] = obj
        if record.threadName and record.threadName != "MainThread":
            entry["thread"] = record.threadName
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message [run=… task=… job=…]``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        tags = [f"{name[:-3]}={var.get()}" for name, var in _IDS if var.get() is not None]
        obj = _object(record)
        if obj is not None:
            tags.insert(0, obj)
        return f"{line} [{' '.join(tags)}]" if tags else line


def _object(record: logging.LogRecord) -> str | None:
    """``namespace/name`` of the Kubernetes object a kopf handler logs about (its ``k8s_ref``)."""
    ref = getattr(record, "k8s_ref", None)
    if not isinstance(ref, dict) or not ref.get("name"):
        return None
    namespace = ref.get("namespace")
    return f"{namespace}/{ref['name']}" if namespace else str(ref["name"])


def _utc(created: float) -> str:
    moment = datetime.datetime.fromtimestamp(created, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _log_uncaught(
    kind: type[BaseException], value: BaseException, tb: types.TracebackType | None
) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, tb)
        return
    logging.getLogger("ferryman").critical("uncaught exception", exc_info=(kind, value, tb))


def _log_thread_uncaught(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or issubclass(args.exc_type, SystemExit):
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("ferryman").critical(
        "uncaught exception in thread %s",
        name,
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )
