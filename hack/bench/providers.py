#!/usr/bin/env python3
"""The demo CRM's declarative provider (``democrm``, YAML) against its Python provider
(``democrm_python``), side by side on the same demo API and PostgreSQL: rounds alternate, each a
fresh database importing the same organizations, then a tree walk of deals' messages.

Prints one line per round, then as its LAST line one JSON object with, per provider, the median
rows/s and worker CPU-seconds per 1,000 rows, and ``yaml_vs_python_rows_per_s`` /
``yaml_vs_python_cpu`` (the ratios of the medians).

    .venv/bin/python -P hack/bench/providers.py [--organizations 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
from pathlib import Path
from typing import Any

from ferryman_worker.db import databases


def _migrate_bench() -> Any:
    """hack/bench/migrate.py as a module (its folder is not put on sys.path: its queue.py
    would shadow the standard library's)."""
    path = Path(__file__).resolve().with_name("migrate.py")
    spec = importlib.util.spec_from_file_location("ferryman_bench_migrate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _migrate_bench()
democrm, meter, run_import = bench.democrm, bench.meter, bench.run_import

PROVIDERS = ("democrm", "democrm_python")


def one(
    dbs: databases.Scratchpad, url: str, pid: int, provider: str, kinds: list[str]
) -> dict[str, float]:
    with dbs.fresh() as db, meter.metered(pid, meter.postmaster(db)) as spent:
        result = run_import(db, url, kinds, provider=provider)
    return {
        "rows_per_s": result["rows"] / result["seconds"],
        "cpu_per_1000_rows": spent.per_1000(result["rows"])["loader"],
        "rows": result["rows"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--organizations", type=int, default=200_000)
    parser.add_argument("--deals", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    found: dict[str, dict[str, list[float]]] = {
        f"{p}/{part}": {"rows_per_s": [], "cpu_per_1000_rows": []}
        for p in PROVIDERS
        for part in ("pages", "tree")
    }
    with databases.server(os.environ.get("FERRYMAN_DATABASE_URL")) as admin_url:
        dbs = databases.Scratchpad(admin_url, "ferryman_provbench")
        with democrm(
            organizations=args.organizations, people=0, deals=args.deals, messages_per_deal=4
        ) as (url, pid):
            for round_ in range(args.rounds):
                order = PROVIDERS if round_ % 2 == 0 else PROVIDERS[::-1]
                for provider in order:
                    for part, kinds in (
                        ("pages", ["organizations"]),
                        ("tree", ["deals", "messages"]),
                    ):
                        result = one(dbs, url, pid, provider, kinds)
                        for key in ("rows_per_s", "cpu_per_1000_rows"):
                            found[f"{provider}/{part}"][key].append(result[key])
                        print(
                            f"round {round_ + 1} {provider:15} {part:5} {result['rows']:>8,} rows"
                            f" {result['rows_per_s']:>9,.0f} rows/s"
                            f" {result['cpu_per_1000_rows']:.3f} CPU-s/1000 rows",
                            flush=True,
                        )
    summary: dict[str, Any] = {
        name: {key: round(statistics.median(values), 4) for key, values in keys.items()}
        for name, keys in found.items()
    }
    for part in ("pages", "tree"):
        yaml, python = summary[f"democrm/{part}"], summary[f"democrm_python/{part}"]
        summary[f"yaml_vs_python_rows_per_s_{part}"] = round(
            yaml["rows_per_s"] / python["rows_per_s"], 3
        )
        summary[f"yaml_vs_python_cpu_{part}"] = round(
            yaml["cpu_per_1000_rows"] / python["cpu_per_1000_rows"], 3
        )
    summary["load_avg_1min"] = os.getloadavg()[0]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
