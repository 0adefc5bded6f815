"""hack/sources/serve: up prints where the seeded server is, down stops it by pid; the data is the
seed's, whichever server and however often it is started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from source_servers import crm, jsonserver, process
from source_servers import pb as pocketbase

SERVE = Path(__file__).resolve().parents[2] / "hack" / "sources" / "serve"


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SERVE), *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("server", ["pocketbase", "json-server"])
def test_up_then_down_by_pid(server: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    up = serve("up", server, "--organizations", "30", "--seed", "5", "--state-dir", str(state))
    assert up.returncode == 0, up.stderr
    described = json.loads(up.stdout)
    assert described["counts"] == crm.generate(5, 30).counts()
    assert httpx.get(described["url"]).status_code < 500
    assert process.alive(described["pid"])

    down = serve("down", server, "--state-dir", str(state))

    assert down.returncode == 0, down.stderr
    assert not process.alive(described["pid"])
    assert not state.exists()
    with pytest.raises(httpx.ConnectError):
        httpx.get(described["url"])


def test_up_refuses_a_rate_limit_for_json_server(tmp_path: Path) -> None:
    up = serve("up", "json-server", "--rate-limit", "5/1", "--state-dir", str(tmp_path / "s"))
    assert up.returncode == 1
    assert "--rate-limit: json-server has no rate limiter" in up.stderr


def test_up_names_the_expected_form_of_a_bad_rate_limit(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expected REQUESTS/SECONDS"):
        pocketbase.RateLimit.parse("fast")


def test_the_same_seed_gives_the_same_records_and_another_seed_others() -> None:
    assert crm.generate(3, 40) == crm.generate(3, 40)
    assert crm.generate(3, 40).records["notes"] != crm.generate(4, 40).records["notes"]


def test_a_fresh_pocketbase_seeded_twice_serves_identical_records(tmp_path: Path) -> None:
    """Seeding through the API (not the cached copy) gives the same records every time (but
    their ``updated`` time, which PocketBase stamps as each record is written)."""
    served = []
    for attempt in ("a", "b"):
        binary = pocketbase.build()
        pocketbase.seed_into(binary, tmp_path / attempt, seed=9, organizations=15)
        running = pocketbase.serve(binary, tmp_path / attempt)
        try:
            with httpx.Client(base_url=running.url) as http:
                token = pocketbase.login(http, "_superusers", pocketbase.SUPERUSER)
                params = {"perPage": 500, "sort": "id"}
                headers = {"Authorization": token}
                path = "/api/collections/notes/records"
                items = http.get(path, params=params, headers=headers).json()["items"]
                served.append([{k: v for k, v in i.items() if k != "updated"} for i in items])
        finally:
            process.stop(running.pid, running.executable)
    assert served[0] == served[1]
    assert [item["body"] for item in served[0]] == [
        r.fields["body"] for r in crm.generate(9, 15).records["notes"]
    ]


def test_json_server_db_is_written_from_the_seed(tmp_path: Path) -> None:
    db = json.loads(jsonserver.database(11, 12).read_text())
    expected = crm.generate(11, 12)
    assert {name: len(db[name]) for name in crm.COLLECTIONS} == expected.counts()
    assert db["people"][0] == jsonserver.record(expected.records["people"][0])


def test_a_process_that_exits_without_stopping_its_server_takes_it_along(tmp_path: Path) -> None:
    script = (
        "import json, sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "from sourceservers import jsonserver;"
        "running = jsonserver.start(Path(sys.argv[2]), 5, 30);"
        "print(json.dumps(running.describe()))"
    )
    argv = [sys.executable, "-c", script, str(SERVE.parent), str(tmp_path / "state")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    described = json.loads(done.stdout)
    assert not process.is_ours(described["pid"], described["executable"])
    with pytest.raises(httpx.ConnectError):
        httpx.get(described["url"])
