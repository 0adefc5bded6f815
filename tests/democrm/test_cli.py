"""The command line: loopback only, clear errors, clean stop, and both ways of running it."""

import json
import os
import signal
import subprocess
import sys

import httpx
import pytest
from tests.democrm.server_fixture import ROOT, SERVER, DemoCRM, read_url


def run(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(SERVER), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::"])
def test_hosts_other_than_loopback_are_refused(host: str) -> None:
    done = run("--host", host)
    assert done.returncode == 2 and done.stdout == ""
    assert "127.0.0.1 only" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--organizations", "-1"], "--organizations"),
        (["--error-rate", "2"], "--error-rate"),
        (["--port", "http"], "--port"),
        (["--organizations", "0", "--people", "5"], "at least one organization"),
        (["--budget-capacity", "10"], "at least the listing and body costs"),
        (["truth", "--deals", "x"], "--deals"),
        (["--auth", "digest"], "--auth: invalid choice"),
        (["--auth", "basic", "--user", "ada"], "--auth basic needs --user and --password"),
        (["--auth", "basic", "--user", "a", "--password", "p", "--api-key", "k"], "not --api-key"),
        (["--user", "ada", "--password", "p"], "--user and --password are for --auth basic"),
        (["--auth", "query", "--oauth-client-id", "c"], "OAuth2 hands out bearer tokens"),
    ],
)
def test_bad_options_are_argparse_errors(args: list[str], message: str) -> None:
    done = run(*args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_server_cleanly(sig: signal.Signals) -> None:
    crm = DemoCRM.start(organizations=3)
    try:
        crm.process.send_signal(sig)
        assert crm.process.wait(10) == 0
    finally:
        crm.stop()


def test_it_prints_one_url_line_and_binds_to_loopback() -> None:
    with DemoCRM.start(organizations=3) as crm:
        assert crm.url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{crm.url}/healthz").status_code == 200


def test_it_runs_as_a_module_with_hack_on_the_path() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "hack"), "PYTHONSAFEPATH": "1"}
    argv = [sys.executable, "-m", "democrm", "--port", "0", "--organizations", "2"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    try:
        url = read_url(process, 20)
        assert httpx.get(f"{url}/_truth").json()["organizations"]["ids"] == [1, 2]
    finally:
        process.terminate()
        process.wait(10)
        assert process.stdout is not None
        process.stdout.close()


def test_the_truth_command_works_under_safe_path() -> None:
    argv = [sys.executable, "-P", str(SERVER), "truth", "--organizations", "4", "--no-ids"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    assert json.loads(done.stdout)["organizations"] == {"count": 4, "malformed": {}}
