"""CPU-seconds by process for the benchmarks (Linux ``/proc``): a server's, PostgreSQL's (its
postmaster, its live backends and the backends that exited) and this process's with the children
it waited for. CPU time moves less than wall time on a shared VM, so the benchmarks report it
beside their rates.

Imported by the benchmarks beside it (``sys.path.append`` of this folder: appended, not
prepended, so the standard library's ``queue`` wins over ``queue.py`` here).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
from collections.abc import Iterator

from ferryman_worker.db import connect


def proc_cpu(pid: int, children: bool = False) -> float:
    """utime + stime of ``pid`` (and of its waited-for children), in seconds; 0 once it is gone."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(fields[i]) for i in ((11, 12, 13, 14) if children else (11, 12)))
    return ticks / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    """This process's CPU-seconds with those of the children it has waited for."""
    return sum(os.times()[:4])


def postmaster(db_url: str) -> int:
    """The pid of the PostgreSQL server ``db_url`` reaches (this machine's only)."""
    with connect.connect(db_url) as conn:  # the backend's parent, read while it lives
        row = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()
        backend = int(row["pid"]) if row else 0
        stat = pathlib.Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()
    return int(stat[1])


def postgres_cpu(pid: int) -> float:
    """The postmaster's CPU with its exited backends', plus its live children's."""
    total = proc_cpu(pid, children=True)
    for child in pathlib.Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, IndexError):
            if child.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1] == str(pid):
                total += proc_cpu(int(child.name))
    return total


@dataclasses.dataclass
class Spent:
    """CPU-seconds spent inside a ``metered`` block, by whom."""

    loader: float = 0.0
    """This process and the children it waited for (the loader's processes)."""
    server: float = 0.0
    postgres: float = 0.0

    @property
    def total(self) -> float:
        return self.loader + self.server + self.postgres

    def per_1000(self, rows: int) -> dict[str, float]:
        """CPU-seconds per 1,000 rows, by process and in all."""
        scale = 1000 / max(rows, 1)
        return {
            "loader": self.loader * scale,
            "server": self.server * scale,
            "postgres": self.postgres * scale,
            "total": self.total * scale,
        }


@contextlib.contextmanager
def metered(server_pid: int, postgres_pid: int) -> Iterator[Spent]:
    """The CPU the block costs this process (with the children it waits for), the server and
    PostgreSQL; filled in when the block ends."""
    spent = Spent()
    before = (own_cpu(), proc_cpu(server_pid), postgres_cpu(postgres_pid))
    yield spent
    spent.loader = own_cpu() - before[0]
    spent.server = proc_cpu(server_pid) - before[1]
    spent.postgres = postgres_cpu(postgres_pid) - before[2]
