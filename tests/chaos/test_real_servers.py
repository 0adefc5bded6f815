"""The real servers nobody here wrote (PocketBase, json-server) through crashes and 429 storms,
with their example providers (examples/sources): a run whose worker processes are SIGKILLed
three times mid-run, and a run through a storm of 429s, each end Succeeded with exactly the
records the server counts, none written twice."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from migration import (
    engine_worker,
    extra_claims,
    landed_once,
    options,
    sigkill_mid_run,
    start_run,
    wait_finished,
)
from net import wait_for
from source_servers import Running, pb
from workers import Subprocess

from ferryman_worker.engine import runs
from ferryman_worker.engine.runtime import credential_env_var
from ferryman_worker.providers import declarative

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "sources"
LANE_WIDTH = 2
STORM = pb.RateLimit(requests=10, seconds=1)
"""Ten calls a second in all on json-server: the run's four stripes ask for many more."""


@dataclasses.dataclass(frozen=True)
class Server:
    example: str
    """Its folder in examples/sources, with provider.yaml."""
    provider: str
    """The provider's name (metadata.name), also the credential's Secret name."""
    fixture: str
    """The session fixture of the seeded server."""
    token: str = ""
    """Which of the server's tokens is the credential ("": it has no authentication)."""
    storm: pb.RateLimit = STORM
    """The limiter of the 429-storm run."""


SERVERS = {
    # PocketBase never limits its superusers: the run reads as the regular user.
    # Its limiter counts per collection and action: two a second, below what one collection's
    # four stripes ask for even on a busy machine (at ten, a slow run may never be refused).
    "pocketbase": Server(
        "pocketbase", "pocketbase", "pocketbase", token="user", storm=pb.RateLimit(2, 1)
    ),
    "json-server": Server("json-server", "jsonserver", "json_server"),
}


def _request(server: Server, running: Running, **changes: Any) -> runs.RunRequest:
    definition = declarative.load_file(EXAMPLES / server.example / "provider.yaml").definition()
    return runs.RunRequest(
        name=f"{server.provider}-crm",
        workspace=server.provider,
        provider=server.provider,
        base_url=running.url,
        credential={"name": server.provider, "key": "token"},
        kinds=[],
        options=options(**changes),
        provider_definition=definition,
    )


def _credential(server: Server, running: Running) -> dict[str, str]:
    token = running.tokens[server.token] if server.token else "unused"
    return {credential_env_var(server.provider, "token"): token}


def _worker(db_url: str, env: dict[str, str]) -> Subprocess:
    return Subprocess(db_url, f"migrations:{LANE_WIDTH}", env)


@pytest.mark.parametrize("name", list(SERVERS))
def test_three_sigkills_mid_run_lose_and_double_nothing(
    name: str, request: pytest.FixtureRequest, db_url: str
) -> None:
    """Two worker processes; at a fifth, two fifths and three fifths of the records one is
    SIGKILLed and another started. A task taken over from a killed worker goes on from its
    checkpoint (the offset inside its page committed with its last window): one that skipped
    the rest of its page instead would lose rows here."""
    server = SERVERS[name]
    running: Running = request.getfixturevalue(server.fixture)
    env = _credential(server, running)
    run_id = start_run(db_url, _request(server, running, page_size=200, max_in_flight=4))
    total = sum(running.counts.values())
    final = sigkill_mid_run(db_url, run_id, total, lambda: _worker(db_url, env), workers=2)
    assert final["state"] == "succeeded", final["error"]
    assert final["tasks_done"] == final["tasks_total"]  # nothing stranded
    landed_once(db_url, server.provider, running.counts)
    assert extra_claims(db_url, run_id) <= 3 * LANE_WIDTH


@pytest.mark.parametrize("name", list(SERVERS))
def test_a_429_storm_slows_the_run_and_loses_nothing(
    name: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, db_url: str
) -> None:
    """The server's limiter (`Server.storm`): PocketBase's own (429 without Retry-After),
    json-server behind hack/sources/json-server/ratelimit.js (429 with Retry-After). A 429 is
    waited out, never a task's failure."""
    server = SERVERS[name]
    start: Callable[..., Running] = request.getfixturevalue(f"start_{server.fixture}")
    running = start(rate_limit=server.storm)
    for variable, value in _credential(server, running).items():
        monkeypatch.setenv(variable, value)
    with engine_worker(db_url):
        run_id = start_run(db_url, _request(server, running, page_size=500))
        final = wait_finished(db_url, run_id, timeout=600)
    assert final["state"] == "succeeded", final["error"]
    landed_once(db_url, server.provider, running.counts)
    wait_for(lambda: _refused(name, running) > 0, 30, f"{name} to have answered 429")


def _refused(name: str, running: Running) -> int:
    """How many calls the server's limiter refused."""
    if name == "json-server":
        return int(httpx.get(f"{running.url}/__ratelimit").json()["limited"])
    headers = {"Authorization": running.tokens["superuser"]}
    params = {"filter": "data.status = 429", "perPage": 1}
    logs = httpx.get(f"{running.url}/api/logs", params=params, headers=headers)
    return int(logs.raise_for_status().json()["totalItems"])
