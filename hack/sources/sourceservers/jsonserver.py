"""json-server 0.17.4 (npm) as a source: installed into the cache from the committed lock file,
its db.json written with the CRM data before it starts (its POST rewrites the whole file), started
and stopped by pid.

Collections are top-level arrays with integer ids from 1 (`/organizations`, `/people`, ...); a
child names its parent in `organizationId`, `personId` or `dealId`, so json-server also answers the
nested routes (`/organizations/1/people`). `_page`/`_limit` answers with a `Link` header
(first/prev/next/last) and `X-Total-Count`; `_start`/`_limit` with `X-Total-Count`; keyset walks
filter with `id_gte` and sort with `_sort=id`. No authentication, no rate limit of its own (a
test may start it behind `ratelimit.js`, a fixed-window limiter answering 429 with Retry-After,
loaded with json-server's `--middlewares`); one Node thread.
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
from .cache import SourceServerError, cache_dir, locked, log
from .pocketbase import RateLimit

VERSION = "0.17.4"  # pinned: the 1.0 betas repeat the last page past the end
SOURCE = Path(__file__).resolve().parents[1] / "json-server"
PARENT_KEY = {"people": "organizationId", "deals": "personId", "notes": "dealId"}


def digest() -> str:
    parts = [(SOURCE / name).read_bytes() for name in ("package.json", "package-lock.json")]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:12]


def install_dir() -> Path:
    return cache_dir() / "json-server" / f"json-server-{VERSION}-{digest()}"


def entry_point(root: Path) -> Path:
    return root / "node_modules" / "json-server" / "lib" / "cli" / "bin.js"


def install() -> Path:
    """The cached json-server's entry point (a Node script), installed first if missing."""
    root = install_dir()
    if entry_point(root).exists():
        return entry_point(root)
    with locked("json-server"):
        if entry_point(root).exists():
            return entry_point(root)
        npm = shutil.which("npm")
        if not npm:
            raise SourceServerError("`npm` is not on PATH: json-server is installed with it")
        root.parent.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="install-", dir=root.parent) as scratch:
            for name in ("package.json", "package-lock.json"):
                shutil.copy(SOURCE / name, scratch)
            command = [npm, "ci", "--no-audit", "--no-fund", "--omit=dev"]
            result = subprocess.run(command, cwd=scratch, capture_output=True, text=True)
            if result.returncode != 0:
                raise SourceServerError(f"npm ci of json-server failed:\n{result.stderr[-3000:]}")
            os.replace(scratch, root)
            os.chmod(root, 0o755)
        log(f"installed json-server {VERSION} in {time.monotonic() - began:.1f} s")
    return entry_point(root)


def record(item: crm.Record) -> dict[str, Any]:
    """The record as json-server holds it: an integer id, its parent's id in `<parent>Id`."""
    out: dict[str, Any] = {"id": item.seq, **item.fields}
    if item.parent is not None:
        out[PARENT_KEY[item.collection]] = item.parent
    return out


def database(seed: int, organizations: int) -> Path:
    """The cached db.json for (seed, organizations), written first if missing."""
    path = cache_dir() / "json-server" / f"db-seed{seed}-orgs{organizations}.json"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    dataset = crm.generate(seed, organizations)
    db = {name: [record(item) for item in dataset.records[name]] for name in crm.COLLECTIONS}
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(json.dumps(db, ensure_ascii=False))
    os.replace(partial, path)
    log(f"wrote db.json with {dataset.total()} records in {time.monotonic() - began:.1f} s")
    return path


def start(
    state_dir: Path,
    seed: int = crm.DEFAULT_SEED,
    organizations: int = crm.DEFAULT_ORGANIZATIONS,
    rate_limit: RateLimit | None = None,
) -> process.Running:
    """A seeded json-server on a free loopback port, its db.json in `state_dir`; with
    `rate_limit`, behind the limiter of `ratelimit.js` (json-server has none of its own)."""
    script = install()
    node = shutil.which("node")
    if not node:
        raise SourceServerError("`node` is not on PATH: json-server runs on it")
    state_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(database(seed, organizations), state_dir / "db.json")
    port = process.free_port()
    url = f"http://{process.HOST}:{port}"
    logfile = state_dir / "json-server.log"
    command = [node, str(script), "--host", process.HOST, "--port", str(port), "--quiet", "db.json"]
    env = None
    if rate_limit is not None:  # after the source: --middlewares takes every argument after it
        command += ["--middlewares", str(SOURCE / "ratelimit.js")]
        env = {
            **os.environ,
            "FERRYMAN_RATE_LIMIT_REQUESTS": str(rate_limit.requests),
            "FERRYMAN_RATE_LIMIT_SECONDS": str(rate_limit.seconds),
        }
    pid = process.spawn(command, state_dir, logfile, env)
    running = process.Running("json-server", url, pid, state_dir, logfile, str(script))
    try:
        process.wait_ready(f"{url}/organizations?_limit=1", pid, logfile)
        with httpx.Client(base_url=url, timeout=60.0) as http:
            running.counts = count(http)
    except BaseException:
        process.stop(pid, str(script))
        raise
    limit = dataclasses.asdict(rate_limit) if rate_limit else None
    running.details = {
        "version": VERSION,
        "seed": seed,
        "organizations": organizations,
        "rate_limit": limit,
    }
    running.save()
    return running


def count(http: httpx.Client) -> dict[str, int]:
    """X-Total-Count of every CRM collection, as the server reports it."""
    counts = {}
    for name in crm.COLLECTIONS:
        response = http.get(f"/{name}", params={"_page": 1, "_limit": 1})
        if response.status_code != 200 or "X-Total-Count" not in response.headers:
            raise SourceServerError(f"json-server /{name}: {response.status_code} {response.text}")
        counts[name] = int(response.headers["X-Total-Count"])
    return counts


def stop(running: process.Running) -> None:
    process.stop(running.pid, running.executable)
