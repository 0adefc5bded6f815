"""``ferryman provider ...``: check a declarative provider file, sample a kind's first pages from a
live source (nothing written), probe a live listing for its pagination style (a suggestion),
print the format's JSON Schema."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import urllib.parse
from typing import Any

import httpx

from ferryman_worker.engine import auth, sample
from ferryman_worker.engine.credentials import Credential, url_host
from ferryman_worker.engine.source import SourceClient
from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import AuthStyle, Request, declarative, probe
from ferryman_worker.providers.declarative import spec

CREDENTIAL_ENV = {
    "token": "FERRYMAN_SOURCE_TOKEN",
    "username": "FERRYMAN_SOURCE_USERNAME",
    "password": "FERRYMAN_SOURCE_PASSWORD",
    "client_id": "FERRYMAN_SOURCE_CLIENT_ID",
    "client_secret": "FERRYMAN_SOURCE_CLIENT_SECRET",
}
"""Where ``sample`` reads the credential (never from the command line, which others can see)."""


def schema() -> dict[str, Any]:
    """The JSON Schema of a declarative provider document."""
    return spec.ProviderDocument.model_json_schema(by_alias=True)


def add_parsers(commands: Any) -> None:
    provider = commands.add_parser(
        "provider", help="check, sample or describe a declarative provider (a YAML file)"
    )
    sub = provider.add_subparsers(dest="provider_command", required=True, metavar="ACTION")
    check = sub.add_parser("check", help="validate a provider file: one line per problem")
    check.add_argument("file", help="a declarative provider YAML")
    check.set_defaults(handler=cmd_check)
    sampled = sub.add_parser(
        "sample",
        help="read a kind's first pages from a live source and show its records, nothing written",
        description="Read a kind's first pages as a run would (pagination, auth, response "
        "policy), validate each record, and show the parsed and the malformed ones with their "
        "reasons; nothing is written. The credential comes from FERRYMAN_SOURCE_TOKEN (or "
        "FERRYMAN_SOURCE_USERNAME and FERRYMAN_SOURCE_PASSWORD for basic auth, "
        "FERRYMAN_SOURCE_CLIENT_ID and FERRYMAN_SOURCE_CLIENT_SECRET for OAuth2 client "
        "credentials; for an OAuth2 refresh-token grant FERRYMAN_SOURCE_TOKEN is an access "
        "token: a refresh would spend the refresh token).",
    )
    sampled.add_argument("file", help="a declarative provider YAML")
    sampled.add_argument("--kind", required=True, help="the kind to read")
    sampled.add_argument("--base-url", required=True, help="the source's base URL")
    sampled.add_argument("--pages", type=int, default=2, help="pages at most (default 2)")
    sampled.add_argument("--page-size", type=int, default=20, help="records a page (default 20)")
    sampled.add_argument("--parent", help="a tree kind: the parent record's id")
    sampled.add_argument(
        "--show", type=int, default=3, help="parsed records shown per page (default 3)"
    )
    sampled.set_defaults(handler=cmd_sample)
    probed = sub.add_parser(
        "probe",
        help="fetch one page of a live listing and suggest its pagination style (a suggestion)",
        description="GET one live response of URL and print, as a YAML snippet marked as a "
        "suggestion, the pagination styles it points at (a Link header, a next URL or a cursor "
        "in the body, page numbers and totals, X-Total-Count, offsets), the most telling first. "
        "Nothing is chosen for you: check it against the API's documentation. The credential "
        "comes from FERRYMAN_SOURCE_TOKEN or --token-file (FERRYMAN_SOURCE_USERNAME and "
        "FERRYMAN_SOURCE_PASSWORD for basic auth) and is sent to URL's host only.",
    )
    probed.add_argument("url", help="a listing's URL, with the query a first page is asked with")
    probed.add_argument(
        "--auth",
        choices=("bearer", "header", "query", "basic", "none"),
        help="how the credential goes on the request (default: bearer with a token, else none)",
    )
    probed.add_argument(
        "--auth-name", default="", help="the header or query parameter (header, query)"
    )
    probed.add_argument("--auth-prefix", default="", help="written before the key (header)")
    probed.add_argument("--token-file", help="a file holding the token (instead of the variable)")
    probed.set_defaults(handler=cmd_probe)
    described = sub.add_parser("schema", help="print the JSON Schema of a provider file")
    described.set_defaults(handler=cmd_schema)


def cmd_check(args: argparse.Namespace, settings: Any) -> int:
    provider = declarative.load_file(args.file)
    print(f"{args.file}: provider {provider.name!r} is valid")
    for name, kind in provider.kinds.items():
        parts = len(kind.split.parts)
        split = f", split in {parts} parts" if parts > 1 else ""
        parent = f" of each {kind.parent}" if kind.parent else ""
        print(f"  {name}: {kind.walk}{parent}, {kind.pagination.style} pagination{split}")
    return 0


def cmd_schema(args: argparse.Namespace, settings: Any) -> int:
    print(json.dumps(schema(), indent=2, sort_keys=True))
    return 0


def cmd_sample(args: argparse.Namespace, settings: Any) -> int:
    provider = declarative.load_file(args.file)
    client = SourceClient(args.base_url, source_auth(provider.auth, args.base_url))
    parent = {"id": args.parent} if args.parent else None
    try:
        for page in sample.sample(
            provider,
            args.kind,
            client,
            pages=args.pages,
            page_size=args.page_size,
            parent=parent,
        ):
            _show(page, args.show)
    finally:
        client.close()
    return 0


def cmd_probe(args: argparse.Namespace, settings: Any) -> int:
    parts = urllib.parse.urlsplit(args.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"{args.url!r} is not an http(s) URL: give the listing's URL")
    base = f"{parts.scheme}://{parts.netloc}"
    token = _probe_token(args.token_file)
    style = AuthStyle(
        args.auth or ("bearer" if token else "none"), args.auth_name, args.auth_prefix
    )
    if style.style in ("header", "query") and not style.name:
        raise ConfigurationError(f"--auth {style.style} needs --auth-name: the header or parameter")
    values = _environment(auth.KEYS["basic"]) if style.style == "basic" else {"token": token}
    credential = Credential(values if style.style != "none" else {}, (url_host(args.url),))
    client = SourceClient(base, auth.build(style, credential.values), guard=credential.guard)
    try:
        params = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        reply = client.call(Request(parts.path or "/", params))
    finally:
        client.close()
    print(probe.snippet(args.url, reply.status, probe.suggest(args.url, reply.headers, reply.body)))
    return 0


def _probe_token(path: str | None) -> str:
    if path is None:
        return os.environ.get(CREDENTIAL_ENV["token"], "")
    try:
        return pathlib.Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigurationError(f"--token-file {path}: cannot read it ({exc.strerror})") from None


def source_auth(style: AuthStyle, base_url: str) -> httpx.Auth:
    """The auth ``style`` with the credential from the environment (``CREDENTIAL_ENV``), bound
    to the host of ``base_url``. An OAuth2 refresh-token grant is not run (a refresh spends
    the refresh token): FERRYMAN_SOURCE_TOKEN is then an access token, sent as a bearer."""
    grant = style.oauth2
    if grant is not None and grant.grant == "refresh_token":
        return auth.Bearer(_environment(("token",))["token"])
    roles = tuple(grant.keys()) if grant else auth.KEYS[style.style]
    values = _environment(roles)
    if grant is None:
        return auth.build(style, values)
    named = {key: values[role] for role, key in grant.keys().items()}  # as the grant names them
    return auth.for_credential(style, Credential(named, (url_host(base_url),)), base_url)


def _environment(roles: tuple[str, ...]) -> dict[str, str]:
    values = {role: os.environ.get(CREDENTIAL_ENV[role], "") for role in roles}
    missing = [CREDENTIAL_ENV[role] for role in roles if not values[role]]
    if missing:
        raise ConfigurationError(f"set {' and '.join(missing)}: the credential to read with")
    return values


def _show(page: sample.SampledPage, show: int) -> None:
    token = json.dumps(page.token)
    print(
        f"page {page.number} (token {token}): {len(page.records)} records,"
        f" {len(page.valid)} parsed, {len(page.malformed)} malformed"
        + (f"; the listing ends here ({page.ended})" if page.ended else "")
    )
    for record in page.valid[:show]:
        print("  " + json.dumps(record, default=str))
    for source_id, reason in page.malformed:
        print(f"  malformed {source_id}: {reason}")
    sys.stdout.flush()
