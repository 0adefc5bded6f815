#!/usr/bin/env python3
"""Benchmark of the local node (`hack/controlplane up --node`): how long it takes to add it, to
load an image, to run a pod and a Job on it, and to remove it, over several rounds.

Brings a control plane up in a temporary directory (root; binaries built if needed), then for
each round: `add-node`, `load-image` of a small busybox image (podman, busybox-static), a
pod-network Pod until Ready, a Job until Complete, `remove-node`. Takes everything down at the end.
Prints one line per round, then as its LAST line one JSON object with the medians
add_node_s, load_image_s, pod_ready_s, job_complete_s, remove_node_s, and load_average (the
machine's 1-minute load average when it ended: compare figures within one run).

    .venv/bin/python hack/bench/node.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTROLPLANE = str(ROOT / "hack" / "controlplane")
BUSYBOX = Path("/bin/busybox")
POD = """apiVersion: v1
kind: Pod
metadata: {name: bench-pod}
spec:
  containers:
  - {name: main, image: IMAGE, imagePullPolicy: Never, command: [sleep, "3600"],
     resources: {limits: {memory: 64Mi}}}
"""
JOB = """apiVersion: batch/v1
kind: Job
metadata: {name: bench-job}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: IMAGE, imagePullPolicy: Never, command: [echo, done]}
"""


def run(*argv: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    result = subprocess.run(
        argv, env=env, input=stdin, capture_output=True, text=True, check=False, timeout=600
    )
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def busybox_image(ref: str) -> None:
    if shutil.which("podman") is None or not BUSYBOX.exists():
        raise SystemExit("needs podman and busybox-static (apt-get install podman busybox-static)")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(BUSYBOX, "bin/busybox")
        for applet in ("sh", "sleep", "echo"):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
    subprocess.run(
        ["podman", "import", "-", ref], input=buffer.getvalue(), check=True, capture_output=True
    )


def one_round(state_dir: str, kubectl: Callable[..., str], image: str) -> dict[str, float]:
    figures = {
        "add_node_s": timed(lambda: run(CONTROLPLANE, "add-node", "--state-dir", state_dir)),
        "load_image_s": timed(
            lambda: run(CONTROLPLANE, "load-image", "--state-dir", state_dir, image)
        ),
    }
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace)

    def pod() -> None:
        kubectl("apply", "-n", namespace, "-f", "-", stdin=POD.replace("IMAGE", image))
        kubectl("wait", "-n", namespace, "pod/bench-pod", "--for=condition=Ready", "--timeout=120s")

    def job() -> None:
        kubectl("apply", "-n", namespace, "-f", "-", stdin=JOB.replace("IMAGE", image))
        kubectl(
            "wait", "-n", namespace, "job/bench-job", "--for=condition=Complete", "--timeout=120s"
        )

    figures["pod_ready_s"] = timed(pod)
    figures["job_complete_s"] = timed(job)
    figures["remove_node_s"] = timed(
        lambda: run(CONTROLPLANE, "remove-node", "--state-dir", state_dir)
    )
    kubectl("delete", "namespace", namespace, "--wait=false")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    image = f"localhost/ferryman-bench-node:{uuid.uuid4().hex[:8]}"
    busybox_image(image)
    scratch = tempfile.mkdtemp(prefix="bench-node-")
    state_dir = f"{scratch}/state"
    try:
        run(CONTROLPLANE, "up", "--state-dir", state_dir, "--watch-pid", str(os.getpid()))
        with open(f"{state_dir}/state.json") as f:
            env = {**os.environ, **json.load(f)["env"]}

        def kubectl(*argv: str, stdin: str | None = None) -> str:
            return run(f"{state_dir}/bin/kubectl", *argv, env=env, stdin=stdin)

        rounds = []
        for number in range(1, args.rounds + 1):
            figures = one_round(state_dir, kubectl, image)
            rounds.append(figures)
            line = ", ".join(f"{key} {value:.2f}" for key, value in figures.items())
            print(f"round {number}: {line} (load {os.getloadavg()[0]:.2f})", flush=True)
    finally:
        subprocess.run([CONTROLPLANE, "down", "--state-dir", state_dir], capture_output=True)
        subprocess.run(["podman", "rmi", "--force", image], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)
    medians = {key: round(statistics.median(r[key] for r in rounds), 2) for key in rounds[0]}
    print(json.dumps({**medians, "load_average": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
