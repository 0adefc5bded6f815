"""PocketBase (github.com/pocketbase/pocketbase, SQLite inside) as a source: built from the Go
module proxy, seeded with the CRM data through its batch API, started and stopped by pid.

The binary is hack/sources/pocketbase/main.go (the framework with nothing added) built at the
version pinned in its go.mod, into the cache under a name carrying a digest of main.go, go.mod and
go.sum: it is rebuilt only when those change. A seeded data directory is kept in the cache per
(version, collections' schema, seed, organizations) and copied for every start, so seeding through
the API is paid once.

Collections: organizations, people (relation `organization`), deals (relation `person`), notes
(relation `deal`), each record with an `updated` time PocketBase keeps (an autodate field: set on
create and on every update); ids are 15 characters, a prefix and the record's number
(`org000000000001`), so sorting by id walks them in order. Listing and viewing need an
authenticated record (the rule `@request.auth.id != ""`): the superuser's token (never
rate-limited) or the user's (limited when the server is started with a rate limit). The limiter
keeps one fixed window per collection, action and client address, and answers 429 without
Retry-After.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from . import crm, process
from .cache import SourceServerError, cache_dir, locked, log, tail

VERSION = "v0.36.8"  # the newest on the module proxy that builds with Go 1.26 (v0.40 needs 1.27)
SOURCE = Path(__file__).resolve().parents[1] / "pocketbase"
SUPERUSER = ("superuser@ferryman.test", "ferryman-superuser-password")
USER = ("user@ferryman.test", "ferryman-user-password")
PREFIX = {"organizations": "org", "people": "per", "deals": "dea", "notes": "not"}
BATCH = 1000  # records per batch request (PocketBase's default allows 50)
READ_RULE = '@request.auth.id != ""'


@dataclasses.dataclass(frozen=True)
class RateLimit:
    """PocketBase's limiter: at most `requests` per `seconds` window, per collection and action."""

    requests: int
    seconds: int

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """'100/10' is 100 requests per 10 seconds."""
        try:
            requests, seconds = (int(part) for part in text.split("/"))
        except ValueError:
            raise ValueError(
                f"rate limit {text!r}: expected REQUESTS/SECONDS, e.g. 100/10"
            ) from None
        if requests < 1 or seconds < 1:
            raise ValueError(f"rate limit {text!r}: both numbers must be at least 1")
        return cls(requests, seconds)


def record_id(collection: str, seq: int) -> str:
    prefix = PREFIX[collection]
    return f"{prefix}{seq:0{15 - len(prefix)}d}"


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GOMODCACHE=str(cache_dir() / "go-mod"),
        GOCACHE=str(cache_dir() / "go-build"),
        GOFLAGS="-modcacherw -buildvcs=false -mod=readonly",
        GOWORK="off",
        GOTOOLCHAIN="local",
        CGO_ENABLED="0",
    )
    return env


def digest() -> str:
    parts = [(SOURCE / name).read_bytes() for name in ("main.go", "go.mod", "go.sum")]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:12]


def binary_path() -> Path:
    return cache_dir() / "pocketbase" / f"pocketbase-{VERSION}-{digest()}"


def build() -> Path:
    """The cached binary, built first if missing."""
    binary = binary_path()
    if binary.exists():
        return binary
    with locked("pocketbase"):
        if binary.exists():  # built by another process while we waited
            return binary
        go = shutil.which(os.environ.get("FERRYMAN_GO", "go"))
        if not go:
            raise SourceServerError("`go` is not on PATH (set FERRYMAN_GO): PocketBase is built")
        binary.parent.mkdir(parents=True, exist_ok=True)
        logfile = binary.parent / f"build-{VERSION}.log"
        partial = binary.with_suffix(".partial")
        command = [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(partial), "."]
        log(f"building PocketBase {VERSION} (go build; log: {logfile})")
        began = time.monotonic()
        with open(logfile, "w") as out:
            result = subprocess.run(command, cwd=SOURCE, env=go_env(), stdout=out, stderr=out)
        if result.returncode != 0:
            raise SourceServerError(
                f"go build of PocketBase failed; see {logfile}:\n{tail(logfile)}"
            )
        os.replace(partial, binary)  # a partial binary is never "present"
        log(f"built PocketBase {VERSION} in {time.monotonic() - began:.1f} s")
    return binary


def start(
    state_dir: Path,
    seed: int = crm.DEFAULT_SEED,
    organizations: int = crm.DEFAULT_ORGANIZATIONS,
    rate_limit: RateLimit | None = None,
) -> process.Running:
    """A seeded PocketBase on a free loopback port, its data in `state_dir` (new or empty)."""
    binary = build()
    data = seeded_data(binary, seed, organizations)
    state_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(data, state_dir / "pb_data")
    running = serve(binary, state_dir)
    try:
        with client(running.url) as http:
            running.tokens["superuser"] = login(http, "_superusers", SUPERUSER)
            http.headers["Authorization"] = running.tokens["superuser"]
            apply_rate_limit(http, rate_limit)
            running.tokens["user"] = login(http, "users", USER)
            running.counts = count(http)
        running.details = {
            "version": VERSION,
            "seed": seed,
            "organizations": organizations,
            "rate_limit": dataclasses.asdict(rate_limit) if rate_limit else None,
            "superuser": SUPERUSER[0],
            "user": USER[0],
        }
    except BaseException:
        process.stop(running.pid, running.executable)
        raise
    running.save()
    return running


def serve(binary: Path, state_dir: Path) -> process.Running:
    port = process.free_port()
    url = f"http://{process.HOST}:{port}"
    logfile = state_dir / "pocketbase.log"
    command = [str(binary), "serve", f"--http={process.HOST}:{port}", "--dir", "pb_data"]
    pid = process.spawn(command, state_dir, logfile)
    try:
        process.wait_ready(f"{url}/api/health", pid, logfile)
    except BaseException:
        process.stop(pid, str(binary))
        raise
    return process.Running("pocketbase", url, pid, state_dir, logfile, str(binary))


def client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=120.0)


def checked(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise SourceServerError(
            f"PocketBase answered {response.status_code} to {response.request.method} "
            f"{response.request.url.path}: {response.text[:500]}"
        )
    return response.json() if response.content else None


def login(http: httpx.Client, collection: str, credentials: tuple[str, str]) -> str:
    email, password = credentials
    body = {"identity": email, "password": password}
    path = f"/api/collections/{collection}/auth-with-password"
    return str(checked(http.post(path, json=body))["token"])


def apply_rate_limit(http: httpx.Client, rate_limit: RateLimit | None) -> None:
    """Turn the limiter on with one rule for every API path, or off."""
    if rate_limit is None:
        settings: dict[str, Any] = {"enabled": False}
    else:
        rule = {
            "label": "/api/",
            "maxRequests": rate_limit.requests,
            "duration": rate_limit.seconds,
        }
        settings = {"enabled": True, "rules": [rule]}
    checked(http.patch("/api/settings", json={"rateLimits": settings}))


def count(http: httpx.Client) -> dict[str, int]:
    """totalItems of every CRM collection, as the server reports it."""
    counts = {}
    for name in crm.COLLECTIONS:
        page = checked(http.get(f"/api/collections/{name}/records", params={"perPage": 1}))
        counts[name] = int(page["totalItems"])
    return counts


def seeded_data(binary: Path, seed: int, organizations: int) -> Path:
    """The cached data directory for (version, seed, organizations), seeded first if missing."""
    name = f"data-{VERSION}-{schema_digest()}-seed{seed}-orgs{organizations}"
    data = cache_dir() / "pocketbase" / name
    if data.exists():
        return data
    with locked("pocketbase-data"):
        if data.exists():
            return data
        with tempfile.TemporaryDirectory(prefix="seed-", dir=data.parent) as scratch:
            seed_into(binary, Path(scratch), seed, organizations)
            os.replace(Path(scratch) / "pb_data", data)
    return data


def seed_into(binary: Path, state_dir: Path, seed: int, organizations: int) -> None:
    """Create the superuser, the user and the collections, then the records through /api/batch."""
    state_dir.mkdir(parents=True, exist_ok=True)
    superuser = [str(binary), "superuser", "upsert", *SUPERUSER, "--dir", "pb_data"]
    result = subprocess.run(superuser, cwd=state_dir, capture_output=True, text=True)
    if result.returncode != 0:
        raise SourceServerError(
            f"pocketbase superuser upsert failed: {result.stdout}{result.stderr}"
        )
    running = serve(binary, state_dir)
    try:
        began = time.monotonic()
        dataset = crm.generate(seed, organizations)
        with client(running.url) as http:
            http.headers["Authorization"] = login(http, "_superusers", SUPERUSER)
            batch = {"enabled": True, "maxRequests": BATCH, "timeout": 120, "maxBodySize": 0}
            checked(http.patch("/api/settings", json={"batch": batch}))
            email, password = USER
            user = {"email": email, "password": password, "passwordConfirm": password}
            checked(http.post("/api/collections/users/records", json=user))
            create_collections(http)
            load(http, dataset)
            if (counts := count(http)) != dataset.counts():
                raise SourceServerError(f"seeded {dataset.counts()} but PocketBase counts {counts}")
        seconds = time.monotonic() - began
        log(f"seeded PocketBase with {dataset.total()} records in {seconds:.1f} s")
    finally:
        process.stop(running.pid, running.executable)  # SIGTERM: SQLite checkpoints its WAL


def create_collections(http: httpx.Client) -> None:
    ids: dict[str, str] = {}
    for name in crm.COLLECTIONS:
        body = collection_schema(name, ids)
        ids[name] = str(checked(http.post("/api/collections", json=body))["id"])


def collection_schema(name: str, ids: dict[str, str]) -> dict[str, Any]:
    fields: list[dict[str, Any]] = []
    indexes = []
    if parent := crm.PARENT.get(name):
        field = crm.PARENT_FIELD[name]
        relation = {"type": "relation", "collectionId": ids[parent], "maxSelect": 1}
        fields.append({"name": field, "required": True, **relation})
        indexes.append(f"CREATE INDEX idx_{name}_{field} ON {name} ({field})")
    fields += FIELDS[name]
    fields.append({"name": "created_at", "type": "date", "required": True})
    fields.append(UPDATED)
    return {
        "name": name,
        "type": "base",
        "fields": fields,
        "indexes": indexes,
        "listRule": READ_RULE,
        "viewRule": READ_RULE,
    }


UPDATED = {"name": "updated", "type": "autodate", "onCreate": True, "onUpdate": True}
"""When the record was last written (PocketBase's own time): what a delta run asks by."""


def schema_digest() -> str:
    """A digest of the collections' fields: a seeded data directory is made again when they
    change."""
    text = json.dumps([FIELDS, UPDATED, crm.PARENT, crm.PARENT_FIELD], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


FIELDS: dict[str, list[dict[str, Any]]] = {
    "organizations": [
        {"name": "name", "type": "text", "required": True},
        {"name": "domain", "type": "text", "required": True},
        {"name": "industry", "type": "text"},
        {"name": "employees", "type": "number", "onlyInt": True},
    ],
    "people": [
        {"name": "first_name", "type": "text", "required": True},
        {"name": "last_name", "type": "text", "required": True},
        {"name": "email", "type": "email", "required": True},
        {"name": "title", "type": "text"},
    ],
    "deals": [
        {"name": "title", "type": "text", "required": True},
        {"name": "amount", "type": "number", "onlyInt": True},
        {"name": "stage", "type": "select", "values": list(crm.STAGES), "maxSelect": 1},
    ],
    "notes": [{"name": "body", "type": "text", "required": True}],
}


def body(record: crm.Record) -> dict[str, Any]:
    """The record as PocketBase stores it: its id, its parent's id in the relation field."""
    out: dict[str, Any] = {"id": record_id(record.collection, record.seq), **record.fields}
    if record.parent is not None:
        parent = crm.PARENT[record.collection]
        out[crm.PARENT_FIELD[record.collection]] = record_id(parent, record.parent)
    return out


def load(http: httpx.Client, dataset: crm.Dataset) -> None:
    pending: list[dict[str, Any]] = []
    for record in crm.walk(dataset):
        url = f"/api/collections/{record.collection}/records"
        pending.append({"method": "POST", "url": url, "body": body(record)})
        if len(pending) == BATCH:
            send_batch(http, pending)
            pending = []
    if pending:
        send_batch(http, pending)


def send_batch(http: httpx.Client, requests: list[dict[str, Any]]) -> None:
    results = checked(http.post("/api/batch", json={"requests": requests}))
    failed = [r for r in results if r.get("status", 0) >= 400]
    if failed:
        raise SourceServerError(f"PocketBase refused {len(failed)} of a batch: {failed[0]}")


def stop(running: process.Running) -> None:
    process.stop(running.pid, running.executable)
