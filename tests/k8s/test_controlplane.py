"""hack/controlplane itself: its environment, its versions, two at once, and cleaning up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.k8s


def running(pid: int) -> bool:
    """Alive and not a zombie (the daemons' parent, `up`, has exited long ago)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def pids(state_dir: Path) -> dict[str, int]:
    state = json.loads((state_dir / "state.json").read_text())
    return {p["name"]: p["pid"] for p in state["processes"]}


def test_eval_env_then_kubectl_and_helm_work_in_a_shell(controlplane: Any, controlplane_cli: Any):
    env = controlplane_cli("env", "--state-dir", str(controlplane.state_dir))
    assert env.returncode == 0, env.stderr
    script = "command -v kubectl helm\nkubectl get namespaces -o name\nhelm list -A -q\n"
    shell = controlplane.env_shell(script, home=os.environ.get("HOME", "/tmp"))
    assert shell.returncode == 0, shell.stderr
    lines = shell.stdout.splitlines()
    bin_dir = controlplane.state_dir / "bin"
    assert lines[:2] == [str(bin_dir / "kubectl"), str(bin_dir / "helm")]
    assert {"namespace/default", "namespace/kube-system"} <= set(lines[2:])


def test_the_binaries_are_the_pinned_versions(controlplane: Any):
    versions = json.loads((controlplane.state_dir / "state.json").read_text())["versions"]
    kubectl = json.loads(controlplane.kubectl("version", "-o", "json").stdout)
    assert kubectl["clientVersion"]["gitVersion"] == versions["kubectl"]
    assert kubectl["serverVersion"]["gitVersion"] == versions["kube-apiserver"]
    helm = controlplane.helm("version", "--template", "{{.Version}}").stdout
    assert helm == versions["helm"]
    etcd = controlplane.run(str(controlplane.bin["etcd"]), "--version").stdout
    assert f"etcd Version: {versions['etcd'].lstrip('v')}" in etcd
    for name, path in controlplane.bin.items():
        assert path.name == f"{name}-{versions[name]}"  # keyed by version in the cache


def test_two_control_planes_run_side_by_side(
    controlplane: Any, start_controlplane: Any, tmp_path: Path
):
    state_dir = tmp_path / "second"
    with start_controlplane(state_dir, "--no-controller-manager") as second:
        assert second.server != controlplane.server
        assert second.kubectl("get", "--raw", "/readyz").stdout == "ok"
        second.kubectl("create", "namespace", "only-in-second")
        assert second.kubectl("get", "namespace", "only-in-second", "-o", "name").stdout
        missing = controlplane.kubectl("get", "namespace", "only-in-second", check=False)
        assert "NotFound" in missing.stderr
        started = pids(state_dir)
        assert set(started) == {"etcd", "kube-apiserver"}
        assert all(running(pid) for pid in started.values())
    # Leaving the block ran `down`: its processes are gone, its state too; the first is unharmed.
    assert not any(running(pid) for pid in started.values())
    assert not state_dir.exists()
    assert controlplane.kubectl("get", "--raw", "/readyz").stdout == "ok"


def test_the_watchdog_takes_it_down_when_its_owner_exits(
    start_controlplane: Any, tmp_path: Path, wait_for: Any
):
    owner = subprocess.Popen(["sleep", "600"])
    state_dir = tmp_path / "watched"
    try:
        with start_controlplane(
            state_dir, "--no-controller-manager", "--watch-pid", str(owner.pid)
        ):
            started = pids(state_dir)
            assert set(started) == {"etcd", "kube-apiserver", "watchdog"}
            owner.send_signal(signal.SIGKILL)
            owner.wait()
            wait_for(lambda: not state_dir.exists(), timeout=60)
            # the watchdog itself exits right after removing the state
            wait_for(lambda: not any(running(pid) for pid in started.values()), timeout=10)
    finally:
        owner.kill()
        owner.wait()


def test_up_refuses_a_state_dir_that_is_up_and_env_needs_one(
    controlplane: Any, controlplane_cli: Any, tmp_path: Path
):
    again = controlplane_cli("up", "--state-dir", str(controlplane.state_dir))
    assert again.returncode == 1
    assert "already up" in again.stderr
    assert controlplane.kubectl("get", "--raw", "/readyz").stdout == "ok"

    nothing = controlplane_cli("env", "--state-dir", str(tmp_path / "none"))
    assert nothing.returncode == 1
    assert "no control plane is up" in nothing.stderr
    assert nothing.stdout == ""
    down = controlplane_cli("down", "--state-dir", str(tmp_path / "none"))
    assert down.returncode == 0


def test_a_foreign_directory_is_never_deleted(controlplane_cli: Any, tmp_path: Path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    for command in ("up", "down"):
        result = controlplane_cli(command, "--state-dir", str(precious))
        assert result.returncode == 1
        assert "not a control plane's state" in result.stderr
    assert (precious / "notes.txt").read_text() == "keep me"


def test_a_node_needs_the_controller_manager(
    start_controlplane: Any, controlplane_cli: Any, tmp_path_factory: pytest.TempPathFactory
):
    refused = controlplane_cli("up", "--node", "--no-controller-manager", "--state-dir", "/none")
    assert refused.returncode == 1
    assert "leave out --no-controller-manager" in refused.stderr
    state_dir = tmp_path_factory.mktemp("bare") / "state"
    with start_controlplane(state_dir, "--no-controller-manager") as bare:
        added = controlplane_cli("add-node", "--state-dir", str(state_dir))
        assert added.returncode == 1
        assert "the node needs kube-controller-manager" in added.stderr
        assert bare.kubectl("get", "nodes", "-o", "name").stdout == ""


def test_another_api_server_has_flags_of_its_own_and_the_same_objects(
    start_controlplane: Any, controlplane_cli: Any, tmp_path_factory: pytest.TempPathFactory
):
    state_dir = tmp_path_factory.mktemp("apiservers") / "state"
    at = ("--state-dir", str(state_dir))
    with start_controlplane(state_dir, "--no-controller-manager") as plane:
        bad = controlplane_cli("add-apiserver", *at, "Limited", "--", "--max-requests-inflight=1")
        assert bad.returncode == 1
        assert "use lower-case letters" in bad.stderr
        added = controlplane_cli("add-apiserver", *at, "limited", "--", "--max-requests-inflight=7")
        assert added.returncode == 0, added.stderr
        server = json.loads(added.stdout)["server"]
        assert server.startswith("https://127.0.0.1:") and server != plane.server
        again = controlplane_cli("add-apiserver", *at, "limited")
        assert again.returncode == 1
        assert "already up" in again.stderr
        pid = pids(state_dir)["kube-apiserver-limited"]
        argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
        assert argv[-2:] == ["--max-requests-inflight=7", ""]
        plane.kubectl("create", "namespace", "seen-by-both")
        seen = plane.kubectl("get", "namespace", "seen-by-both", "-o", "name", "--server", server)
        assert seen.stdout.strip() == "namespace/seen-by-both"
        removed = controlplane_cli("remove-apiserver", *at, "limited")
        assert removed.returncode == 0, removed.stderr
        assert not running(pid)
        assert "kube-apiserver-limited" not in pids(state_dir)
        other = controlplane_cli("add-apiserver", *at, "other")
        assert other.returncode == 0, other.stderr
        left = pids(state_dir)["kube-apiserver-other"]
    assert not running(left)  # down stops it with the rest
