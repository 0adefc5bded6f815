"""``ferryman operator`` and ``ferryman crd``: registered into the ``ferryman`` console script
through the ``ferryman.commands`` entry point (the worker package never imports this one)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

OPERATOR_HELP = """\
Run the MigrationRun operator (kopf): admit runs into PostgreSQL (one live run per workspace),
refresh their status, suspend, resume, cancel (on delete) and retry them, delete finished ones
after ttlSecondsAfterFinished, and size the worker Deployment from its pool spec. Only the
holder of the Lease FERRYMAN_OPERATOR_LEASE_NAME (default ferryman-operator, in the pod's
namespace) acts; others wait. The database comes from FERRYMAN_DATABASE_URL, the cluster from
in-cluster config or KUBECONFIG. With --metrics-port it serves Prometheus metrics (runs by
state, admissions and refusals, reconcile errors, the oldest queued run's age, the last sizing).
Settings: FERRYMAN_OPERATOR_* (docs/kubernetes.md, "The operator")."""


def register(commands: Any) -> None:
    operator = commands.add_parser(
        "operator",
        help="run the Kubernetes operator for MigrationRuns",
        description=OPERATOR_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = operator.add_mutually_exclusive_group()
    where.add_argument(
        "--namespace",
        dest="operator_namespaces",
        action="append",
        metavar="NS",
        help="handle MigrationRuns of this namespace (repeatable; default: all namespaces)",
    )
    where.add_argument(
        "--all-namespaces", action="store_true", help="handle MigrationRuns of every namespace"
    )
    operator.add_argument(
        "--liveness-port",
        type=int,
        metavar="N",
        help="serve the liveness endpoint http://0.0.0.0:N/healthz (default: none)",
    )
    operator.add_argument(
        "--metrics-port",
        type=int,
        metavar="N",
        help="serve GET /metrics (Prometheus's text format) on http://0.0.0.0:N "
        "(FERRYMAN_OPERATOR_METRICS_PORT; default 0 = off; docs/observability.md)",
    )
    operator.set_defaults(handler=cmd_operator)
    crd = commands.add_parser("crd", help="print a CRD generated from the models (or write it)")
    crd.add_argument(
        "--kind",
        choices=["MigrationRun", "MigrationProvider", "MigrationMapping"],
        default="MigrationRun",
        help="the custom resource whose CRD to generate (default: MigrationRun)",
    )
    crd.add_argument(
        "--output",
        action="append",
        metavar="FILE",
        help="write the CRD to FILE instead of printing it (repeatable)",
    )
    crd.set_defaults(handler=cmd_crd)


def cmd_operator(args: argparse.Namespace, _: Any) -> int:
    from ferryman_operator import main, settings

    namespaces = [] if args.all_namespaces else (args.operator_namespaces or None)
    config = settings.load(
        namespaces=namespaces, liveness_port=args.liveness_port, metrics_port=args.metrics_port
    )
    return main.run(config)


def cmd_crd(args: argparse.Namespace, _: Any) -> int:
    from ferryman_operator import crd

    text = crd.render(crd.BY_KIND[args.kind])
    if not args.output:
        sys.stdout.write(text)
        return 0
    for name in args.output:
        path = Path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return 0
