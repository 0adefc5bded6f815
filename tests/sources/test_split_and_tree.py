"""Walks the examples do not take, through ``ferryman run`` against the real servers: a kind
whose listing is split into parts (json-server's id ranges, each part followed by its own Link
header; PocketBase's time windows as values of its filter), and tree kinds listed per parent over
PocketBase's 15-character text ids. The providers are the examples' with a few keys changed."""

from __future__ import annotations

import pathlib
import urllib.parse
from collections import Counter, defaultdict
from typing import Any

import httpx
import pytest
import yaml
from migration import landed_once
from runfiles import ferryman_run
from source_servers import Running, StartServer

from ferryman_worker.db import connect

pytestmark = pytest.mark.slow
EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sources"


def _files(
    example: str, url: str, folder: pathlib.Path, kinds: dict[str, Any], options: dict[str, int]
) -> tuple[pathlib.Path, pathlib.Path]:
    """The example's provider with ``kinds`` (one phase each, in order) and its run at ``url``
    with ``options``."""
    provider = yaml.safe_load((EXAMPLES / example / "provider.yaml").read_text())
    provider["spec"]["kinds"] = kinds
    provider["spec"]["phases"] = [[name] for name in kinds]
    run = yaml.safe_load((EXAMPLES / example / "run.yaml").read_text())
    run["spec"]["source"]["baseURL"] = url
    run["spec"]["options"] = options
    provider_path, run_path = folder / "provider.yaml", folder / "run.yaml"
    provider_path.write_text(yaml.safe_dump(provider))
    run_path.write_text(yaml.safe_dump(run))
    return run_path, provider_path


def _rows(db_url: str, query: str) -> list[dict[str, Any]]:
    with connect.connect(db_url) as conn:
        return conn.execute(query).fetchall()  # type: ignore[arg-type]


def _succeeded(db_url: str) -> None:
    assert _rows(db_url, "SELECT state FROM ferryman_runs") == [{"state": "succeeded"}]


def _people_split(
    where: tuple[str, str, str, str],
    folder: pathlib.Path,
    db_url: str,
    people: dict[str, Any],
    options: dict[str, int],
    total: int,
    overlap: int,
) -> list[dict[str, Any]]:
    """``ferryman run`` of the example ``where`` (example, url, its workspace and Secret name,
    token) with the kind ``people`` only: it succeeds, lands ``total`` people once each, the
    ``overlap`` listed by two parts skipped the second time; returns the run's tasks, all
    done."""
    example, url, name, token = where
    run, provider = _files(example, url, folder, {"people": people}, options)
    assert "Succeeded" in ferryman_run(run, provider, db_url, name, token)
    _succeeded(db_url)
    landed_once(db_url, name, {"people": total})
    tasks = _rows(
        db_url,
        "SELECT cursor_key, cursor, status, processed_offset, rows_written, rows_skipped"
        " FROM ferryman_tasks ORDER BY id",
    )
    assert {task["status"] for task in tasks} == {"done"}
    assert sum(t["rows_written"] for t in tasks) == total
    assert sum(t["rows_skipped"] for t in tasks) == overlap  # written once, skipped once
    return tasks


def test_a_split_kind_walks_each_id_range_in_its_own_chain_and_writes_the_overlap_once(
    json_server: Running, tmp_path: pathlib.Path, db_url: str
) -> None:
    """People split into three id ranges, each followed by json-server's Link header (a page
    reached only from the page before it). The ranges are closed (id_gte, id_lte): the records
    at the two inner bounds are listed by two parts each, and written once."""
    total = int(
        httpx.get(f"{json_server.url}/people", params={"_page": 1, "_limit": 1}).headers[
            "X-Total-Count"
        ]
    )
    bounds = [1, total // 3, 2 * total // 3, total]
    people = yaml.safe_load((EXAMPLES / "json-server" / "provider.yaml").read_text())["spec"][
        "kinds"
    ]["people"]
    people["request"] = {"path": "/people", "query": {"_page": 1}}
    people["pagination"] = {"style": "link_header", "sizeParam": "_limit", "maxPageSize": 1000}
    people["split"] = {"ranges": {"low": "id_gte", "high": "id_lte", "bounds": bounds}}
    where = ("json-server", json_server.url, "jsonserver", "unused")
    tasks = _people_split(where, tmp_path, db_url, people, {"pageSize": 700}, total, overlap=2)
    chains: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for task in tasks:
        part = task["cursor"]["part"]
        assert task["cursor_key"] == f"people:{part}:{task['cursor']['page']}"
        chains[part].append(task)
    assert sorted(chains) == [0, 1, 2]
    for part, chain in chains.items():
        low, high = bounds[part], bounds[part + 1]
        size = high - low + 1
        # the chain's own pages, one task each, each with the checkpoint of its own page
        assert [t["cursor"]["page"] for t in chain] == list(range(-(-size // 700)))
        assert chain[0]["cursor"]["token"] is None
        for task in chain[1:]:  # the next link json-server gave, inside the part's range
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(task["cursor"]["token"]).query)
            assert query["id_gte"] == [str(low)] and query["id_lte"] == [str(high)]
        listed = sum(t["rows_written"] + t["rows_skipped"] for t in chain)
        assert listed == sum(t["processed_offset"] for t in chain) == size


def test_a_split_into_overlapping_time_windows_walks_each_window_and_writes_the_overlap_once(
    pocketbase: Running, tmp_path: pathlib.Path, db_url: str
) -> None:
    """People split by partition values of PocketBase's filter: two windows of created_at that
    overlap (each walked by page number in its own stripes); the people created in both are
    listed twice and written once."""
    headers = {"Authorization": pocketbase.tokens["superuser"]}
    path = "/api/collections/people/records"
    with httpx.Client(base_url=pocketbase.url, headers=headers, timeout=60.0) as http:

        def count(where: str = "") -> int:
            body = http.get(path, params={"perPage": 1, "filter": where}).json()
            return int(body["totalItems"])

        def created(at: int) -> str:
            params = {"perPage": 1, "page": at, "sort": "created_at", "skipTotal": 1}
            return str(http.get(path, params=params).json()["items"][0]["created_at"])

        total = count()
        early, late = created(total // 3), created(total // 2)
        windows = [f"created_at < '{late}'", f"created_at >= '{early}'"]
        expected = [count(where) for where in windows]
        overlap = count(f"{windows[0]} && {windows[1]}")
    assert 0 < overlap < min(expected) and sum(expected) - overlap == total
    people = _pocketbase_kinds()["people"]
    people.pop("changedSince")  # it sets the filter too: a split on it would be refused
    people["split"] = {"values": {"param": "filter", "values": windows}}
    options = {"pageSize": 500, "stripes": 3}
    where = ("pocketbase", pocketbase.url, "pocketbase", pocketbase.tokens["user"])
    tasks = _people_split(where, tmp_path, db_url, people, options, total, overlap)
    for part, size in enumerate(expected):
        chain = [t for t in tasks if t["cursor"]["part"] == part]
        keys = {t["cursor_key"] for t in chain}  # a stripe may end on an empty page past the end
        assert {f"people:{part}:{page}" for page in range(-(-size // 500))} <= keys
        assert sum(t["processed_offset"] for t in chain) == size


def _pocketbase_kinds() -> dict[str, Any]:
    kinds: dict[str, Any] = yaml.safe_load((EXAMPLES / "pocketbase" / "provider.yaml").read_text())[
        "spec"
    ]["kinds"]
    return kinds


def _pocketbase_tree() -> dict[str, Any]:
    """Organizations listed by page; their people listed per organization (filtered by its text
    id); their deals listed per person, each deal's stage fetched from its detail by id."""
    kinds = _pocketbase_kinds()
    for child, link in (("people", "organization"), ("deals", "person")):
        kind = kinds[child]
        kind["walk"] = "tree"
        kind["parent"] = {"people": "organizations", "deals": "people"}[child]
        kind["request"]["query"]["filter"] = f"{link} = '{{parent.id}}'"
        kind.pop("changedSince")
    kinds["deals"]["fields"]["detail_stage"] = {"type": "string", "maxLength": 64}
    kinds["deals"]["body"] = {
        "request": {"path": "/api/collections/deals/records/{record.id}"},
        "field": "stage",
        "into": "detail_stage",
    }
    kinds.pop("notes")
    return kinds


def _served(server: Running, collection: str) -> dict[str, dict[str, Any]]:
    """Every record of ``collection`` as PocketBase serves it to its superuser, by id."""
    headers = {"Authorization": server.tokens["superuser"]}
    found: dict[str, dict[str, Any]] = {}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60.0) as http:
        page = 1
        while True:
            params = {"page": page, "perPage": 500, "sort": "id"}
            body = http.get(f"/api/collections/{collection}/records", params=params).json()
            found.update((item["id"], item) for item in body["items"])
            if page >= body["totalPages"]:
                return found
            page += 1


def test_tree_kinds_walk_pocketbase_text_ids_and_land_every_child_once_with_its_parent(
    start_pocketbase: StartServer, tmp_path: pathlib.Path, db_url: str
) -> None:
    server = start_pocketbase(organizations=40)
    options = {"pageSize": 3, "parentsPerTask": 7, "fetchThreads": 3}
    run, provider = _files("pocketbase", server.url, tmp_path, _pocketbase_tree(), options)
    out = ferryman_run(run, provider, db_url, "pocketbase", server.tokens["user"])
    assert "Succeeded" in out
    _succeeded(db_url)
    served = {kind: _served(server, kind) for kind in ("organizations", "people", "deals")}
    landed_once(db_url, "pocketbase", {kind: len(records) for kind, records in served.items()})

    landed = _rows(db_url, "SELECT kind, source_id, record FROM ferryman_landing")
    records = {(row["kind"], row["source_id"]): row["record"] for row in landed}
    for kind, link in (("people", "organization"), ("deals", "person")):
        for source_id, item in served[kind].items():
            assert len(source_id) == 15 and not source_id.isdigit()
            assert records[(kind, source_id)][link] == item[link], (kind, source_id)
    per_parent = Counter(person["organization"] for person in served["people"].values())
    assert max(per_parent.values()) > options["pageSize"]  # some listings took several pages
    for source_id, deal in served["deals"].items():  # the body, fetched by its text id
        assert records[("deals", source_id)]["detail_stage"] == deal["stage"]

    # each tree task lists its parents by their text ids: every parent in exactly one task
    tasks = _rows(db_url, "SELECT kind, cursor, status FROM ferryman_tasks ORDER BY id")
    for kind, parent in (("people", "organizations"), ("deals", "people")):
        parents = [p for t in tasks if t["kind"] == kind for p in t["cursor"]["parents"]]
        assert sorted(parents) == sorted(served[parent]), kind
    assert {task["status"] for task in tasks} == {"done"}


def test_a_tree_parent_whose_listing_ends_before_its_stated_total_fails_the_run(
    start_pocketbase: StartServer, tmp_path: pathlib.Path, db_url: str
) -> None:
    """People listed per organization, three a page, at most one page (``maxPages: 1``): an
    organization with more people than that ends its listing short of PocketBase's
    ``totalPages``, and the run fails naming the parent, the rule and the fix."""
    server = start_pocketbase(organizations=40)
    kinds = _pocketbase_tree()
    kinds.pop("deals")
    kinds["people"]["pagination"].setdefault("stop", {})["maxPages"] = 1
    options = {"pageSize": 3, "parentsPerTask": 7}
    run, provider = _files("pocketbase", server.url, tmp_path, kinds, options)
    out = ferryman_run(run, provider, db_url, "pocketbase", server.tokens["user"], exit_code=1)
    (found,) = _rows(db_url, "SELECT state, error FROM ferryman_runs")
    assert found["state"] == "failed" and "Failed" in out
    assert "ListingShort: people of organizations " in found["error"]
    assert "the listing ended on the declared maximum of 1 pages" in found["error"]
    assert "raise the kind's stop.maxPages" in found["error"]
