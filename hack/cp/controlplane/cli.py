"""The command line of hack/controlplane."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from . import __doc__ as DOC
from . import host
from .apiservers import add_apiserver, remove_apiserver
from .cluster import default_state_dir, down, up, watch
from .common import REPO, ControlPlaneError, format_seconds, log
from .gobuild import binaries, build, cp_cache, default_jobs
from .node import add_node, load
from .processes import State
from .teardown import remove_node


def cmd_build(args: argparse.Namespace) -> int:
    if all(path.exists() for path in binaries(args.node).values()):
        log(f"all binaries are in the cache: {cp_cache() / 'bin'}")
        return 0
    started = time.monotonic()
    for name, path in build(args.jobs, args.node).items():
        log(f"{name:<24} {path}")
    log(f"build done in {format_seconds(time.monotonic() - started)}")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    started = time.monotonic()
    state = up(
        args.state_dir,
        not args.no_controller_manager,
        args.watch_pid,
        args.timeout,
        node=args.node,
        node_wait=args.node_wait,
    )
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
    log("; ".join(stopped) if stopped else f"nothing was running in {args.state_dir}")
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


def loaded_state(args: argparse.Namespace) -> State:
    state = State.load(args.state_dir)
    if state is None or "env" not in state.info:
        raise ControlPlaneError(f"no control plane is up in {args.state_dir} (run `up`)")
    return state


def cmd_add_node(args: argparse.Namespace) -> int:
    add_node(loaded_state(args), args.timeout, args.node_wait)
    return 0


def cmd_remove_node(args: argparse.Namespace) -> int:
    state = State.load(args.state_dir)
    done = remove_node(state, delete_object=True) if state else []
    log("; ".join(done) if done else f"no node was up in {args.state_dir}")
    return 0


def cmd_add_apiserver(args: argparse.Namespace) -> int:
    flags = args.flags[1:] if args.flags[:1] == ["--"] else args.flags
    server = add_apiserver(loaded_state(args), args.name, flags, args.timeout)
    log(f"API server {args.name} is up: {server}")
    print(json.dumps({"name": args.name, "server": server}))
    return 0


def cmd_remove_apiserver(args: argparse.Namespace) -> int:
    state = State.load(args.state_dir)
    done = remove_apiserver(state, args.name) if state else []
    log("; ".join(done) if done else f"no API server {args.name} was up in {args.state_dir}")
    return 0


def cmd_load_image(args: argparse.Namespace) -> int:
    load(loaded_state(args), args.ref)
    return 0


def cmd_host_snapshot(args: argparse.Namespace) -> int:
    print(json.dumps(host.snapshot(), indent=1))
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
    commands = (
        "{build,up,down,env,add-node,remove-node,add-apiserver,remove-apiserver,load-image,"
        "host-snapshot}"
    )
    sub = top.add_subparsers(dest="command", required=True, metavar=commands)
    build_cmd = sub.add_parser("build", help="compile the binaries into the cache")
    build_cmd.add_argument("--jobs", type=int, default=default_jobs(), help="go build -p")
    build_cmd.add_argument(
        "--node", action="store_true", help="also kubelet, kube-scheduler and containerd"
    )
    build_cmd.set_defaults(func=cmd_build)
    up_cmd = sub.add_parser("up", help="build if needed, start a control plane, wait for it")
    up_cmd.add_argument(
        "--no-controller-manager", action="store_true", help="start only etcd and kube-apiserver"
    )
    up_cmd.add_argument("--watch-pid", type=int, help="run `down` when this process has exited")
    up_cmd.add_argument(
        "--node", action="store_true", help="also a node: containerd, kube-scheduler, kubelet"
    )
    up_cmd.set_defaults(func=cmd_up)
    add_cmd = sub.add_parser("add-node", help="add the node to a control plane that is up")
    add_cmd.set_defaults(func=cmd_add_node)
    for command in (up_cmd, add_cmd):
        command.add_argument("--timeout", type=float, default=180.0, help="seconds to be ready")
        command.add_argument(
            "--node-wait",
            type=float,
            default=600.0,
            help="seconds to wait while another node runs on this machine (one at a time)",
        )
    remove_cmd = sub.add_parser(
        "remove-node", help="stop the node and undo what it did; the control plane stays up"
    )
    remove_cmd.set_defaults(func=cmd_remove_node)
    add_api_cmd = sub.add_parser(
        "add-apiserver",
        help="start another kube-apiserver on the same etcd with extra flags; print its URL",
    )
    add_api_cmd.add_argument("name", help="names it (its process: kube-apiserver-NAME)")
    add_api_cmd.add_argument(
        "flags", nargs=argparse.REMAINDER, help="after --: kube-apiserver flags of its own"
    )
    add_api_cmd.add_argument("--timeout", type=float, default=120.0, help="seconds to be ready")
    add_api_cmd.set_defaults(func=cmd_add_apiserver)
    remove_api_cmd = sub.add_parser(
        "remove-apiserver", help="stop an API server that add-apiserver started"
    )
    remove_api_cmd.add_argument("name")
    remove_api_cmd.set_defaults(func=cmd_remove_apiserver)
    load_cmd = sub.add_parser(
        "load-image", help="import a podman image into the node's containerd (k8s.io namespace)"
    )
    load_cmd.add_argument("ref", help="a podman image, e.g. localhost/ferryman:0.1.0")
    load_cmd.set_defaults(func=cmd_load_image)
    snapshot_cmd = sub.add_parser(
        "host-snapshot",
        help="print (JSON) the host state `down` must leave as `up --node` found it",
    )
    snapshot_cmd.set_defaults(func=cmd_host_snapshot)
    down_cmd = sub.add_parser("down", help="stop what `up` started, remove its state")
    down_cmd.set_defaults(func=cmd_down)
    env_cmd = sub.add_parser("env", help="print KUBECONFIG, PATH and the binaries as exports")
    env_cmd.set_defaults(func=cmd_env)
    watch_cmd = sub.add_parser("_watch")  # internal: the watchdog of `up --watch-pid`
    watch_cmd.add_argument("--pid", type=int, required=True)
    watch_cmd.set_defaults(func=cmd_watch)
    for command in (
        up_cmd,
        down_cmd,
        env_cmd,
        watch_cmd,
        add_cmd,
        remove_cmd,
        add_api_cmd,
        remove_api_cmd,
        load_cmd,
    ):
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
