"""README's Kubernetes quick start, run as written on the local node: the block's commands
exactly, after its four fill-in lines are given this machine's image, PostgreSQL and demo CRM,
and CLUSTER_VALUES the values a local node needs (charts/ferryman/values-local.yaml and the API
server's port, as docs/kubernetes.md's "A local cluster" says, and free host ports)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from migration import check_against_truth
from tcp_postgres import create_database, tcp_postgres
from tests.democrm.server_fixture import DemoCRM
from tests.k8s import operator_bench
from tests.k8s.test_chart_e2e import image_ref, local_values, url_of

pytestmark = [pytest.mark.k8s, pytest.mark.node, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FILL_IN = ("IMAGE", "DATABASE_URL", "SOURCE_URL", "SOURCE_TOKEN")


def quick_start() -> list[str]:
    """The lines of the shell block under README's "Quick start: on Kubernetes"."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Quick start: on Kubernetes") :]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1).splitlines()


def test_the_fill_in_lines_come_first_and_nothing_else_needs_editing() -> None:
    lines = quick_start()
    assert [line.split("=", 1)[0] for line in lines[:4]] == list(FILL_IN)
    assert not any(word in line for line in lines[4:] for word in ("REGISTRY", "USER:", "..."))


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def test_readmes_kubernetes_quick_start_works_as_written(node: Any) -> None:
    plane = node.controlplane
    image = image_ref()
    node.load_image(image)
    operator_bench.remove_cluster_rbac(plane)  # test_operator*.py's, under the chart's names
    lines = quick_start()
    with (
        tcp_postgres() as admin_url,
        DemoCRM.start(seed=21, organizations=300, people=200, deals=20) as crm,
    ):
        db_url = url_of(create_database(admin_url, "ferryman_quickstart"))
        given = {
            "IMAGE": image,
            "DATABASE_URL": db_url,
            "SOURCE_URL": crm.url,
            "SOURCE_TOKEN": crm.api_key,
        }
        flags = local_values(node, image)
        values = [  # the image comes from IMAGE
            part
            for flag, value in zip(flags[::2], flags[1::2], strict=True)
            if not value.startswith(("image.repository=", "image.tag="))
            for part in (flag, value)
        ]
        script = "\n".join(
            [
                *(f"{name}={_shell_quote(given[name])}" for name in FILL_IN),
                f"CLUSTER_VALUES={_shell_quote(' '.join(values))}",
                *lines[4:],
            ]
        )
        try:
            result = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=ROOT,
                env=plane.env,
                capture_output=True,
                text=True,
                timeout=1200,
            )
            assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
            assert "acme-crm" in result.stdout and "Succeeded" in result.stdout
            check_against_truth(db_url, crm.truth(), workspace="acme")
        finally:
            plane.kubectl("delete", "mrun", "--all", "-n", "team-a", check=False)
            plane.helm("uninstall", "ferryman", "-n", "ferryman", "--wait", check=False)
            for namespace in ("team-a", "ferryman"):
                plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
