"""Command line: ``serve`` (the default) runs the API, ``truth`` prints the ground truth.

    python hack/democrm [serve] --port 0 --seed 1 --organizations 2000 ...
    python hack/democrm truth --seed 1 --organizations 2000 ...

Both take the same dataset options, so ``truth`` with the server's options prints exactly what
the server's ``GET /_truth`` returns.
"""

import argparse
import dataclasses
import logging
import sys
from collections.abc import Callable, Sequence

from democrm import auth, data, oauth, server, truth, wire
from democrm.app import App
from democrm.settings import (
    RUNTIME_CHOICES,
    RUNTIME_INTS,
    RUNTIME_RANGES,
    Dataset,
    Runtime,
    SettingsError,
)
from democrm.state import State

COMMANDS = ("serve", "truth")
LOOPBACK = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1"}

DATASET_HELP = {
    "organizations": "number of organizations",
    "people": "number of people, each in an organization",
    "deals": "number of deals",
    "messages_per_deal": "mean messages per deal; each has 0..2*mean",
}
RUNTIME_HELP = {
    "latency_ms": "sleep before answering each listing, in ms",
    "body_latency_ms": "sleep before answering each message body, in ms",
    "error_rate": "share of /v1 calls answered 500/502/503 (0..1)",
    "stall_rate": "share of /v1 calls that stall before answering (0..1)",
    "stall_seconds": "how long a stalled call sleeps",
    "budget_capacity": "tokens per API key when full; 0 disables the budget (no 429s)",
    "budget_refill_per_s": "tokens added back per second per key",
    "listing_cost": "tokens a listing call costs",
    "body_cost": "tokens a message body call costs",
    "throttle_first": "the first N /v1 calls of each API key answered 429 (Retry-After: 1)",
    "retry_after": "a 429's Retry-After: seconds, or an HTTP date",
    "paging_loop": "a looping pagination: off; token (a cursor listing repeats the cursor it"
    " was given); page (offset, page and link listings ignore the position: the first page)",
}


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or args_list[0] not in (*COMMANDS, "-h", "--help"):
        args_list.insert(0, "serve")
    parser = build_parser()
    args = parser.parse_args(args_list)
    command: Callable[[argparse.Namespace, argparse.ArgumentParser], int] = args.run
    return command(args, args.parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="democrm", description="A deterministic demo CRM API (see hack/democrm/README.md)."
    )
    commands = parser.add_subparsers(metavar="{serve,truth}")
    dataset = dataset_options()
    serve = commands.add_parser(
        "serve", parents=[dataset], help="run the HTTP API (default command)"
    )
    add_serve_options(serve)
    serve.set_defaults(run=run_serve, parser=serve)
    show = commands.add_parser("truth", parents=[dataset], help="print the ground truth as JSON")
    show.add_argument("--no-ids", action="store_true", help="leave out the id lists")
    show.set_defaults(run=run_truth, parser=show)
    return parser


def dataset_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("dataset (fixed for the process)")
    defaults = Dataset()
    seed_type = bounded(int, -(2**63), 2**63 - 1)
    group.add_argument("--seed", type=seed_type, default=defaults.seed, help="(default 1)")
    for name, help_text in DATASET_HELP.items():
        default = getattr(defaults, name)
        flag = "--" + name.replace("_", "-")
        group.add_argument(
            flag,
            type=bounded(int, 0, 100_000_000),
            default=default,
            help=f"{help_text} (default {default})",
        )
    group.add_argument(
        "--malformed-rate",
        type=bounded(float, 0, 1),
        default=defaults.malformed_rate,
        help=f"share of records with one defect, 0..1 (default {defaults.malformed_rate})",
    )
    group.add_argument(
        "--gone-deal-rate",
        type=bounded(float, 0, 1),
        default=defaults.gone_deal_rate,
        help="share of deals deleted after the deals listing: listed, but their messages answer "
        f"404, 0..1 (default {defaults.gone_deal_rate})",
    )
    return parent


def add_serve_options(serve: argparse.ArgumentParser) -> None:
    net = serve.add_argument_group("network")
    net.add_argument("--host", type=loopback, default="127.0.0.1", help="127.0.0.1 only")
    net.add_argument("--port", type=bounded(int, 0, 65535), default=0, help="0 picks a free port")
    net.add_argument(
        "--api-key",
        action="append",
        default=[],
        help="accepted API key (repeatable): a bearer token, or with --auth query the api_key"
        " parameter; without any, every non-empty key is accepted",
    )
    net.add_argument(
        "--auth",
        choices=auth.STYLES,
        default="bearer",
        help="how /v1 calls authenticate: bearer (Authorization: Bearer <key>), basic (HTTP"
        " basic with --user and --password) or query (?api_key=<key>) (default bearer)",
    )
    net.add_argument("--user", default="", help="the HTTP basic user (--auth basic)")
    net.add_argument("--password", default="", help="the HTTP basic password (--auth basic)")
    net.add_argument("-v", "--verbose", action="store_true", help="log every request to stderr")
    grant = serve.add_argument_group("OAuth2 (on when --oauth-client-id is given)")
    grant.add_argument("--oauth-client-id", help="the one client's id")
    grant.add_argument("--oauth-client-secret", default="", help="the client's secret")
    grant.add_argument(
        "--oauth-refresh-token", help="the first refresh token (single-use, rotated on use)"
    )
    grant.add_argument(
        "--oauth-access-ttl",
        type=bounded(float, 1, 86_400),
        default=3600.0,
        help="seconds an access token lives (default 3600)",
    )
    grant.add_argument(
        "--oauth-token-latency-ms",
        type=bounded(float, 0, 60_000),
        default=0.0,
        help="sleep before answering the token endpoint, in ms (default 0)",
    )
    group = serve.add_argument_group("runtime (changeable with POST /_config)")
    defaults = Runtime()
    for name, (low, high) in RUNTIME_RANGES.items():
        kind: type[int] | type[float] = int if name in RUNTIME_INTS else float
        default = getattr(defaults, name)
        help_text = f"{RUNTIME_HELP[name]} (default {default})"
        flag = "--" + name.replace("_", "-")
        group.add_argument(flag, type=bounded(kind, low, high), default=default, help=help_text)
    for name, choices in RUNTIME_CHOICES.items():
        default = getattr(defaults, name)
        help_text = f"{RUNTIME_HELP[name]} (default {default})"
        flag = "--" + name.replace("_", "-")
        group.add_argument(flag, choices=choices, default=default, help=help_text)


def run_serve(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    dataset = make_dataset(args, parser)
    try:
        names = [*RUNTIME_RANGES, *RUNTIME_CHOICES]
        runtime = Runtime(**{name: getattr(args, name) for name in names})
    except SettingsError as exc:
        parser.error(str(exc))
    access = make_auth(args, parser)
    level = logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(stream=sys.stderr, level=level, format="democrm: %(message)s")
    client = None
    if args.oauth_client_id:
        client = oauth.Client(
            args.oauth_client_id,
            args.oauth_client_secret,
            args.oauth_refresh_token,
            args.oauth_access_ttl,
            args.oauth_token_latency_ms,
        )
    state = State(data.Source(dataset), runtime, access, client)
    return server.serve(App(state), args.host, args.port, args.verbose)


def make_auth(args: argparse.Namespace, parser: argparse.ArgumentParser) -> auth.Auth:
    if args.auth != "bearer" and args.oauth_client_id:
        parser.error(f"--auth {args.auth} and --oauth-client-id: OAuth2 hands out bearer tokens")
    if args.auth == "basic" and args.api_key:
        parser.error("--auth basic takes --user and --password, not --api-key")
    if args.auth == "basic" and not (args.user and args.password):
        parser.error("--auth basic needs --user and --password (both non-empty)")
    if args.auth != "basic" and (args.user or args.password):
        parser.error("--user and --password are for --auth basic")
    return auth.Auth(args.auth, frozenset(args.api_key), args.user, args.password)


def run_truth(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    source = data.Source(make_dataset(args, parser))
    sys.stdout.buffer.write(wire.to_json(truth.ground_truth(source, with_ids=not args.no_ids)))
    sys.stdout.buffer.write(b"\n")
    sys.stdout.flush()
    return 0


def make_dataset(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Dataset:
    names = [field.name for field in dataclasses.fields(Dataset)]
    try:
        return Dataset(**{name: getattr(args, name) for name in names})
    except SettingsError as exc:
        parser.error(str(exc))


def bounded(kind: type[int] | type[float], low: float, high: float) -> Callable[[str], float]:
    """An argparse type: ``kind`` parsed from text and checked against ``low..high``."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a valid {kind.__name__}: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def loopback(text: str) -> str:
    if text not in LOOPBACK:
        raise argparse.ArgumentTypeError(
            f"{text!r} refused: the demo CRM binds to 127.0.0.1 only (it has no real security)"
        )
    return LOOPBACK[text]
