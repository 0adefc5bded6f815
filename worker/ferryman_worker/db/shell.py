"""``ferryman db shell``: psql on ferryman's database, the embedded one included.

The embedded server listens on a socket in a folder of its own and stops with the last ferryman
process using it, so a person cannot reach it with a URL of their own: this command holds the
server for psql's lifetime. The connection goes to psql through libpq's environment variables,
never on its command line (a password there is readable by every user of the machine).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from psycopg import conninfo

from ferryman_worker.errors import ConfigurationError

ENVIRONMENT: Final = {"application_name": "PGAPPNAME", "dbname": "PGDATABASE"}
"""libpq parameters whose variable is not PG + the parameter's name in capitals."""


def environment(url: str) -> dict[str, str]:
    """The libpq environment variables that make psql connect as ``url`` says."""
    params = conninfo.conninfo_to_dict(url)
    return {ENVIRONMENT.get(k, "PG" + k.upper()): str(v) for k, v in params.items() if v != ""}


def psql() -> str:
    """psql from PATH, else the one the embedded server's package ships."""
    found = shutil.which("psql")
    if found:
        return found
    import pgserver

    bundled = Path(pgserver.__file__).parent / "pginstall" / "bin" / "psql"
    if bundled.is_file():
        return str(bundled)
    raise ConfigurationError(
        "db shell: no psql on PATH: install PostgreSQL's client (Debian: apt-get install "
        "postgresql-client), or connect your own client to FERRYMAN_DATABASE_URL"
    )


def run(url: str, arguments: Sequence[str]) -> int:
    """psql with ``arguments`` on the database ``url`` (the PG* variables of this environment
    left out: they would override it); its exit status."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    args = list(arguments[1:] if arguments[:1] == ["--"] else arguments)
    return subprocess.run([psql(), *args], env={**env, **environment(url)}, check=False).returncode
