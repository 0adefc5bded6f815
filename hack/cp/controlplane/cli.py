"""The command line of hack/controlplane."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from . import __doc__ as DOC
from .cluster import default_state_dir, down, up, watch
from .common import REPO, ControlPlaneError, format_seconds, log
from .gobuild import binaries, build, cp_cache, default_jobs
from .processes import State


def cmd_build(args: argparse.Namespace) -> int:
    if all(path.exists() for path in binaries().values()):
        log(f"all binaries are in the cache: {cp_cache() / 'bin'}")
        return 0
    started = time.monotonic()
    for name, path in build(args.jobs).items():
        log(f"{name:<24} {path}")
    log(f"build done in {format_seconds(time.monotonic() - started)}")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    started = time.monotonic()
    state = up(args.state_dir, not args.no_controller_manager, args.watch_pid, args.timeout)
    log(f"up in {format_seconds(time.monotonic() - started)}: {state.info['server']}")
    log(f"state and logs: {state.directory}")
    log(
        f'use it: eval "$({shlex.quote(str(REPO / "hack" / "controlplane"))} env'
        + (f" --state-dir {shlex.quote(str(args.state_dir))}" if args.state_dir_given else "")
        + ')"; kubectl get ns'
    )
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    stopped = down(args.state_dir)
    log(f"stopped {', '.join(stopped)}" if stopped else f"nothing was running in {args.state_dir}")
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    state = State.load(args.state_dir)
    if state is None or "env" not in state.info:
        raise ControlPlaneError(f"no control plane is up in {args.state_dir} (run `up`)")
    env = state.info["env"]
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")
    print(f'export PATH={shlex.quote(env["FERRYMAN_CONTROLPLANE_BIN"])}:"$PATH"')
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    watch(args.state_dir, args.pid)
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="hack/controlplane",
        description=DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="{build,up,down,env}")
    build_cmd = sub.add_parser("build", help="compile the binaries into the cache")
    build_cmd.add_argument("--jobs", type=int, default=default_jobs(), help="go build -p")
    build_cmd.set_defaults(func=cmd_build)
    up_cmd = sub.add_parser("up", help="build if needed, start a control plane, wait for it")
    up_cmd.add_argument(
        "--no-controller-manager", action="store_true", help="start only etcd and kube-apiserver"
    )
    up_cmd.add_argument("--watch-pid", type=int, help="run `down` when this process has exited")
    up_cmd.add_argument("--timeout", type=float, default=180.0, help="seconds to be ready")
    up_cmd.set_defaults(func=cmd_up)
    down_cmd = sub.add_parser("down", help="stop what `up` started, remove its state")
    down_cmd.set_defaults(func=cmd_down)
    env_cmd = sub.add_parser("env", help="print KUBECONFIG, PATH and the binaries as exports")
    env_cmd.set_defaults(func=cmd_env)
    watch_cmd = sub.add_parser("_watch")  # internal: the watchdog of `up --watch-pid`
    watch_cmd.add_argument("--pid", type=int, required=True)
    watch_cmd.set_defaults(func=cmd_watch)
    for command in (up_cmd, down_cmd, env_cmd, watch_cmd):
        command.add_argument(
            "--state-dir",
            type=Path,
            help="default: $FERRYMAN_CONTROLPLANE_DIR or .state/controlplane",
        )
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if hasattr(args, "state_dir"):
        args.state_dir_given = args.state_dir is not None
        args.state_dir = (args.state_dir or default_state_dir()).resolve()
    try:
        return int(args.func(args))
    except ControlPlaneError as error:
        log(f"error: {error}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
