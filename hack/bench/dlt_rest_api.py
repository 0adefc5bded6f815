#!/usr/bin/env python3
"""One dlt ``rest_api`` load of the CRM collections of a source server into PostgreSQL: the peer
``sources.py`` compares ferryman with. Run in a process of its own; prints one JSON line
``{"seconds", "dlt"}``.

    python -P hack/bench/dlt_rest_api.py pocketbase|json-server URL TOKEN DB_URL DATASET PAGE \
        [COLLECTION,...]

dlt as a user would configure it from its documentation: one resource per collection, appending,
the server's own pagination (PocketBase: ``page_number`` over ``page``/``perPage`` stopping at
``totalPages``; json-server: ``header_link`` following ``Link: rel="next"``), ``PAGE`` records a
page, PocketBase's token as a bearer token (``-`` for none), all four collections unless named.
Telemetry off. The seconds are ``pipeline.run``'s (extract, normalise, load); the interpreter's
start is not counted.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

os.environ["RUNTIME__DLTHUB_TELEMETRY"] = "false"  # before dlt reads its configuration

import dlt
from dlt.sources.rest_api import rest_api_source

DLT_VERSION = "1.31.0"  # the version the published figures were measured with
COLLECTIONS = ("organizations", "people", "deals", "notes")


def pocketbase(url: str, token: str, page: int, names: list[str]) -> dict[str, Any]:
    paginator = {"type": "page_number", "base_page": 1, "page_param": "page"}
    paginator["total_path"] = "totalPages"
    endpoint = {"params": {"perPage": page, "sort": "id"}, "data_selector": "items"}
    client: dict[str, Any] = {"base_url": f"{url}/api/collections/", "paginator": paginator}
    if token != "-":
        client["auth"] = {"type": "bearer", "token": token}
    resources = [{"name": n, "endpoint": {"path": f"{n}/records", **endpoint}} for n in names]
    return {"client": client, "resource_defaults": {}, "resources": resources}


def json_server(url: str, page: int, names: list[str]) -> dict[str, Any]:
    client = {"base_url": f"{url}/", "paginator": {"type": "header_link"}}
    params = {"_page": 1, "_limit": page}
    resources = [{"name": n, "endpoint": {"path": n, "params": params}} for n in names]
    return {"client": client, "resources": resources}


def main() -> None:
    server, url, token, db_url, dataset, page = sys.argv[1:7]
    names = sys.argv[7].split(",") if len(sys.argv) > 7 else list(COLLECTIONS)
    if dlt.__version__ != DLT_VERSION:
        print(
            f"warning: dlt {dlt.__version__}, figures were measured with {DLT_VERSION}",
            file=sys.stderr,
        )
    if server == "pocketbase":
        config = pocketbase(url, token, int(page), names)
    else:
        config = json_server(url, int(page), names)
    config["resource_defaults"] = {"write_disposition": "append"}
    source = rest_api_source(config, name=f"{dataset}_source")
    with tempfile.TemporaryDirectory(prefix="ferryman-dlt-") as folder:
        pipeline = dlt.pipeline(
            pipeline_name=dataset,
            pipelines_dir=folder,
            destination=dlt.destinations.postgres(credentials=db_url),
            dataset_name=dataset,
        )
        began = time.perf_counter()
        pipeline.run(source)
        seconds = time.perf_counter() - began
    print(json.dumps({"seconds": seconds, "dlt": dlt.__version__}))


if __name__ == "__main__":
    main()
