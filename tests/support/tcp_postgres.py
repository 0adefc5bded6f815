"""A PostgreSQL server on a loopback TCP port, for pods.

The session's embedded server listens on a Unix socket only, which a pod cannot reach; a pod on
the host's network reaches 127.0.0.1. This starts another server from the same embedded binaries
(pgserver's), on a free port, trusting local connections, and deletes it afterwards.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from net import free_port
from pgserver import _commands as pg  # type: ignore[import-untyped]
from pgserver.utils import (  # type: ignore[import-untyped]
    ensure_prefix_permissions,
    ensure_user_exists,
)

from ferryman_worker.db import databases


@contextlib.contextmanager
def tcp_postgres() -> Iterator[str]:
    """Yield the admin URL (``postgresql://postgres@127.0.0.1:<port>/postgres``)."""
    folder = Path(tempfile.mkdtemp(prefix="ferryman-tcp-pg-"))
    folder.chmod(0o755)
    data = folder / "data"
    data.mkdir()
    user = None
    if os.geteuid() == 0:  # postgres refuses to run as root: pgserver's own system user
        user = "pgserver"
        ensure_user_exists(user)
        # as pgserver's own server does: its user must reach the binaries, in a clone whose
        # folder may be 0700 (mktemp -d), even before this process started its embedded server
        ensure_prefix_permissions(pg.POSTGRES_BIN_PATH)
        entry = pwd.getpwnam(user)
        for path in (folder, data):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    port = free_port()
    pg.initdb(["--auth=trust", "--encoding=utf8", "-U", "postgres"], pgdata=data, user=user)
    pg.pg_ctl(
        ["-w", "-o", f"-h 127.0.0.1 -p {port} -k {folder}", "-l", str(folder / "log"), "start"],
        pgdata=data,
        user=user,
        timeout=60,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        pg.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data, user=user, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def create_database(admin_url: str, name: str) -> str:
    """A new database on that server; its URL."""
    return databases.create(admin_url, name)
