"""The leader steps down in time: cut off from the API server by a silent network (a blackhole
proxy, no refusal), it stops acting before the standby may take the Lease, and when the network
returns it does not write again: the standby leads."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from tests.democrm.server_fixture import DemoCRM
from tests.k8s import blackhole
from tests.k8s.operator_bench import LEASE, Bench, eventually, run_manifest

pytestmark = pytest.mark.k8s

LEASE_SECONDS = "6"  # renewals every 2 s, requests limited to 2 s
SLOW = {"seed": 5, "organizations": 1200, "people": 0, "deals": 0, "latency_ms": 250}
ORGS = {"kinds": ["organizations"], "options": {"pageSize": 50, "stripes": 2}}


def _acquired(world: Bench) -> float:
    """When the Lease's holder took it (its acquireTime), as time.time()."""
    text = world.cp.kubectl(
        "get", "lease", LEASE, "-n", world.release_ns, "-o", "jsonpath={.spec.acquireTime}"
    ).stdout.strip()
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@pytest.mark.slow
def test_a_leader_behind_a_silent_network_stops_acting_before_the_standby_takes_over(
    world: Bench, tmp_path: Path
) -> None:
    with DemoCRM.start(**SLOW) as crm, blackhole.running(world.kubeconfig) as proxy:
        world.secret(crm.api_key)
        proxied = proxy.kubeconfig(tmp_path / "proxied.kubeconfig")
        leader = world.operator(
            KUBECONFIG=str(proxied), FERRYMAN_OPERATOR_LEASE_DURATION=LEASE_SECONDS
        )
        standby = world.operator(wait=False, FERRYMAN_OPERATOR_LEASE_DURATION=LEASE_SECONDS)
        world.workers(2)
        world.apply(run_manifest("silent", crm.url, **ORGS))
        world.wait_state("silent", "Running", timeout=60)
        assert [r for r in proxy.requests if r.write], "the leader wrote through the proxy"

        proxy.dark()
        world.wait_leader(standby, timeout=60)
        takeover = _acquired(world)
        stood_down = blackhole.json_log_times(leader.output(), "lost Lease")
        assert stood_down, f"the leader never stood down:\n{leader.output()[-3000:]}"
        assert stood_down[0] < takeover
        assert max(r.at for r in proxy.requests if r.write) < takeover

        back = proxy.light()
        eventually(
            lambda: blackhole.lease_gets_after(proxy.requests, back, LEASE) >= 3,
            60,
            "the old leader to look at the Lease again, as a standby",
        )
        assert blackhole.writes_after(proxy.requests, back) == []
        assert world.leader() == standby.identity  # type: ignore[attr-defined]
        world.wait_state("silent", "Succeeded", timeout=180)  # the new leader acts
        assert blackhole.writes_after(proxy.requests, back) == []
