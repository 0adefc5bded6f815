"""``ferryman provider ...``: check a declarative provider file, sample a kind's first pages from a
live source (nothing written), print the format's JSON Schema."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ferryman_worker.engine import auth, sample
from ferryman_worker.engine.source import SourceClient
from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import declarative
from ferryman_worker.providers.declarative import spec

CREDENTIAL_ENV = {
    "token": "FERRYMAN_SOURCE_TOKEN",
    "username": "FERRYMAN_SOURCE_USERNAME",
    "password": "FERRYMAN_SOURCE_PASSWORD",
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
        "FERRYMAN_SOURCE_USERNAME and FERRYMAN_SOURCE_PASSWORD for basic auth).",
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
    needed = auth.KEYS[provider.auth.style]  # none for an API without authentication
    values = {key: os.environ.get(CREDENTIAL_ENV[key], "") for key in needed}
    missing = [CREDENTIAL_ENV[key] for key in needed if not values[key]]
    if missing:
        raise ConfigurationError(f"set {' and '.join(missing)}: the credential to read with")
    client = SourceClient(args.base_url, auth.build(provider.auth, values))
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
