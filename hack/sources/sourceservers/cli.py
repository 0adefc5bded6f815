"""The command line of hack/sources/serve (see the package's docstring)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from . import __doc__ as USAGE
from . import crm, jsonserver, pocketbase, process
from .cache import SourceServerError

SERVERS = ("pocketbase", "json-server")
REPO = Path(__file__).resolve().parents[3]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="hack/sources/serve",
        description=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build/install into the cache")
    build.add_argument("server", nargs="?", choices=SERVERS)
    up = commands.add_parser("up", help="start a seeded server")
    up.add_argument("server", choices=SERVERS)
    up.add_argument("--seed", type=int, default=crm.DEFAULT_SEED)
    up.add_argument("--organizations", type=int, default=crm.DEFAULT_ORGANIZATIONS)
    up.add_argument("--rate-limit", type=pocketbase.RateLimit.parse, help="PocketBase only")
    up.add_argument("--state-dir", type=Path)
    down = commands.add_parser("down", help="stop a server `up` started")
    down.add_argument("server", choices=SERVERS)
    down.add_argument("--state-dir", type=Path)
    return top


def state_dir(args: argparse.Namespace) -> Path:
    chosen: Path = args.state_dir or REPO / ".state" / "sources" / args.server
    return chosen.resolve()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "build":
            if args.server in (None, "pocketbase"):
                print(pocketbase.build())
            if args.server in (None, "json-server"):
                print(jsonserver.install())
        elif args.command == "up":
            print(json.dumps(up(args), indent=2))
        else:
            down(state_dir(args))
    except (SourceServerError, ValueError) as error:
        print(f"hack/sources/serve: {error}", file=sys.stderr)
        return 1
    return 0


def up(args: argparse.Namespace) -> dict[str, object]:
    where = state_dir(args)
    if (where / "server.json").exists():
        raise SourceServerError(f"a server was started in {where}: run `down` first")
    shutil.rmtree(where, ignore_errors=True)
    if args.server == "pocketbase":
        running = pocketbase.start(where, args.seed, args.organizations, args.rate_limit)
    elif args.rate_limit:
        raise ValueError("--rate-limit: json-server has no rate limiter (PocketBase has)")
    else:
        running = jsonserver.start(where, args.seed, args.organizations)
    process.release(running.pid)  # `down` stops it
    return running.describe()


def down(where: Path) -> None:
    running = process.Running.load(where)
    process.stop(running.pid, running.executable)
    shutil.rmtree(where)
