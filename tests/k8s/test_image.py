"""The image `hack/image` builds (localhost/ferryman:<version>), run with podman the way the
chart runs it: as uid 10001, read-only root filesystem, no capabilities, /tmp the only writable
place, on the host's network against a PostgreSQL on loopback.

Slow the first time (a cold build is ~2 min); afterwards `hack/image` is a no-op.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from net import Hopeless, free_port, wait_for
from tcp_postgres import create_database, tcp_postgres

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(
    os.environ.get("FERRYMAN_CACHE_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ferryman"
)
# what the chart's securityContext asks of the kubelet, in podman's words
RESTRICTED = (
    "--read-only",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
    "--tmpfs=/tmp",
    "--network=host",
)


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CONTAINERS_CONF=str(CACHE / "image" / "containers.conf"))
    return subprocess.run(
        ["podman", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def image() -> str:
    result = subprocess.run(
        [str(ROOT / "hack" / "image")], capture_output=True, text=True, timeout=1800
    )
    assert result.returncode == 0, f"hack/image failed:\n{result.stderr[-4000:]}"
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def database_url() -> Iterator[str]:
    with tcp_postgres() as admin_url:
        params = psycopg.conninfo.conninfo_to_dict(create_database(admin_url, "ferryman"))
        yield f"postgresql://{params['user']}@{params['host']}:{params['port']}/ferryman"


def test_the_ref_is_the_project_version_and_a_second_build_is_a_no_op(image: str) -> None:
    version = subprocess.run(
        [str(ROOT / "hack" / "image"), "--ref"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert image == version == "localhost/ferryman:0.1.0"
    again = subprocess.run(
        [str(ROOT / "hack" / "image")], capture_output=True, text=True, timeout=240, check=True
    )
    assert f"{image} (cached, content " in again.stderr, again.stderr
    assert "building" not in again.stderr


def test_the_image_runs_ferryman_as_a_non_root_user_with_a_safe_path(image: str) -> None:
    [config] = json.loads(podman("image", "inspect", image).stdout)
    assert config["Config"]["User"] == "10001:10001"
    assert config["Config"]["Entrypoint"] == ["/opt/ferryman/bin/ferryman"]
    assert "PYTHONSAFEPATH=1" in config["Config"]["Env"]
    assert config["Config"]["Labels"]["org.opencontainers.image.version"] == "0.1.0"
    version = podman("run", "--rm", *RESTRICTED, image, "--version")
    assert version.returncode == 0 and version.stdout.strip() == "ferryman 0.1.0", version.stderr


def test_the_image_holds_the_wheel_and_no_compiler_pip_or_source_tree(image: str) -> None:
    probe = (
        "for tool in gcc cc c++ make pip pip3; do command -v $tool; done;"
        " ls /src /dist 2>/dev/null;"
        " python3 -c 'import ferryman_worker, ferryman_operator;"
        " print(ferryman_worker.__file__); print(ferryman_operator.__file__)'"
    )
    result = podman("run", "--rm", *RESTRICTED, "--entrypoint", "/bin/sh", image, "-c", probe)
    site = "/opt/ferryman/lib/python3.11/site-packages"
    assert result.stdout.split() == [
        f"{site}/ferryman_worker/__init__.py",
        f"{site}/ferryman_operator/__init__.py",
    ], result.stdout + result.stderr


def test_migrate_and_a_worker_run_read_only_and_answer_the_probes(
    image: str, database_url: str
) -> None:
    env = ("-e", f"FERRYMAN_DATABASE_URL={database_url}")
    migrate = podman("run", "--rm", *RESTRICTED, *env, image, "db", "migrate")
    assert migrate.returncode == 0, migrate.stderr
    assert "schema is up to date" in migrate.stdout
    assert database_url not in migrate.stdout + migrate.stderr

    port = free_port()
    name = f"ferryman-image-test-{os.getpid()}"
    args = ["run", "--rm", "--name", name, *RESTRICTED, *env, "-e", f"FERRYMAN_METRICS_PORT={port}"]
    env_ = dict(os.environ, CONTAINERS_CONF=str(CACHE / "image" / "containers.conf"))
    worker = subprocess.Popen(
        ["podman", *args, image, "worker"], env=env_, stderr=subprocess.PIPE, text=True
    )
    try:

        def ready() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                if worker.poll() is not None:
                    raise Hopeless(worker.stderr.read() if worker.stderr else "") from None
                return False

        wait_for(ready, 60, "the worker in the container to be ready")
        assert httpx.get(f"http://127.0.0.1:{port}/livez", timeout=2).status_code == 200
        worker.send_signal(signal.SIGTERM)  # podman passes it on, as the kubelet would
        assert worker.wait(60) == 0
        assert worker.stderr is not None
        log = worker.stderr.read()
        assert "signal received: no new claims" in log, log
        assert database_url not in log
    finally:
        if worker.poll() is None:
            podman("rm", "--force", name)
            worker.wait(30)
        if worker.stderr is not None:
            worker.stderr.close()
