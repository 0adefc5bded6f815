#!/usr/bin/env python3
"""One dlt load of the demo CRM's organizations into PostgreSQL: the peer ``migrate.py``
compares ferryman with. Run in a process of its own; prints one JSON line ``{"rows", "seconds"}``.

    python -P hack/bench/dlt_load.py CRM_URL API_KEY DB_URL COUNT append|merge

dlt as a user would write it: defaults, one resource paging 500 organizations at a time, into a
dataset of its own; ``merge`` declares ``id`` the primary key. Telemetry off. The seconds are
``pipeline.run``'s (extract, normalise, load), like ferryman's from admission to its last commit;
neither counts its interpreter's start.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

os.environ["RUNTIME__DLT_TELEMETRY"] = "false"  # before dlt reads its configuration

import dlt
import httpx

PAGE = 500


def organizations(url: str, api_key: str, count: int) -> Iterator[list[dict[str, Any]]]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {api_key}"}) as http:
        for start in range(0, count, PAGE):
            page = http.get("/v1/organizations", params={"start": start, "limit": PAGE})
            page.raise_for_status()
            yield page.json()["data"]


def main() -> None:
    url, api_key, db_url, count, mode = sys.argv[1:6]
    pages = organizations(url, api_key, int(count))
    if mode == "merge":
        resource = dlt.resource(
            pages, name="organizations", write_disposition="merge", primary_key="id"
        )
    else:
        resource = dlt.resource(pages, name="organizations", write_disposition="append")
    with tempfile.TemporaryDirectory(prefix="ferryman-dlt-") as folder:
        pipeline = dlt.pipeline(
            pipeline_name=f"bench_{mode}",
            pipelines_dir=folder,
            destination=dlt.destinations.postgres(credentials=db_url),
            dataset_name="dlt_bench",
        )
        began = time.perf_counter()
        pipeline.run(resource)
        seconds = time.perf_counter() - began
    print(json.dumps({"rows": int(count), "seconds": seconds}))


if __name__ == "__main__":
    main()
