"""The operator's test bench on the real control plane, in the chart's topology: the generated
CRD, the chart's operator RBAC bound to a ServiceAccount whose token the operator runs under, the
operator and ``ferryman worker`` as local processes sharing the installation's sealing key (the
chart mounts one Secret into both), and the demo CRM. A run's Secret lives in the run's own
namespace only: the operator reads and seals it at admission, the workers get it from the
database and have no Kubernetes credentials at all."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from net import Hopeless, free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "migrationruns.ferryman.dev.yaml"
CRDS = ("migrationruns", "migrationproviders", "migrationmappings")
CHART = ROOT / "charts" / "ferryman"
EXAMPLE = ROOT / "examples" / "run.yaml"
RELEASE = "ferryman"
SERVICE_ACCOUNT = "ferryman-operator"
LEASE = "ferryman-operator"
DESTINATION_SCHEMAS = "public,sales"
"""Where mappings may write: the demo CRM's tables and the example application's schema
(examples/apps/sales), as an installation running that application allows."""
POLL = 0.25
"""Seconds between two checks of a wait on the control plane: a check runs kubectl (a process)
or asks a process over HTTP, on a machine the operator and the workers share."""
eventually = functools.partial(wait_for, interval=POLL)
"""``net.wait_for(check, timeout, what)`` at the control plane's pace."""
COLD_START = 120.0
"""Seconds an operator process may take to start and first read the Lease. Importing the
operator alone took 11-19 s at a load average of 9-14 on two cores (3 s of CPU), and the first
Lease request waits on an API server as starved; 30 s failed 3 of 7 starts there."""


def install_crd(cp: Any) -> None:
    """Every CRD of crds/ (MigrationRun, MigrationProvider, MigrationMapping), Established."""
    for plural in CRDS:
        path = ROOT / "crds" / f"{plural}.ferryman.dev.yaml"
        cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    for plural in CRDS:
        cp.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", f"crd/{plural}.ferryman.dev"
        )


def install_operator_rbac(cp: Any, namespace: str, home: Path) -> Path:
    """Apply exactly the chart's operator RBAC (helm template of operator-rbac.yaml), create the
    ServiceAccount the chart would, and return a kubeconfig holding only its token."""
    rendered = cp.helm(
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        namespace,
        "--show-only",
        "templates/operator-rbac.yaml",
    ).stdout
    cp.kubectl("apply", "-f", "-", input=rendered)
    cp.kubectl("create", "serviceaccount", SERVICE_ACCOUNT, "-n", namespace)
    token = cp.kubectl(
        "create", "token", SERVICE_ACCOUNT, "-n", namespace, "--duration", "6h"
    ).stdout.strip()
    admin = json.loads(cp.kubeconfig.read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [
            {
                "name": "operator",
                "context": {"cluster": admin["clusters"][0]["name"], "user": "operator"},
            }
        ],
        "current-context": "operator",
    }
    path = home / "operator.kubeconfig"
    path.write_text(json.dumps(config))
    return path


def remove_cluster_rbac(cp: Any) -> None:
    """Delete the cluster-wide RBAC objects install_operator_rbac applied (the chart's names,
    without being helm's), so that a helm release of the same name can own them."""
    cp.kubectl(
        "delete", "clusterrole,clusterrolebinding", "-l", "app.kubernetes.io/instance=" + RELEASE,
        "--ignore-not-found",
    )  # fmt: skip


class Process:
    """A child process with its output in a file, shown when a test fails. ``kill`` and
    ``terminate`` reap it and close the file (whatever happens on the way); ``remove`` deletes
    the file."""

    def __init__(self, argv: list[str], env: dict[str, str], name: str) -> None:
        self.name = name
        self.log = tempfile.NamedTemporaryFile("w+", prefix=f"{name}-", suffix=".log", delete=False)  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv, env=env, stdout=self.log, stderr=subprocess.STDOUT, text=True
        )

    def output(self) -> str:
        return Path(self.log.name).read_text()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            if self.alive():
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait(10)
        finally:
            self.log.close()

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; the exit code."""
        try:
            if self.alive():
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.send_signal(signal.SIGKILL)
                    self.proc.wait(10)
            return self.proc.returncode
        finally:
            self.log.close()

    def remove(self) -> None:
        Path(self.log.name).unlink(missing_ok=True)


def ferryman(*args: str) -> list[str]:
    return [sys.executable, "-m", "ferryman_worker.cli", "--log-level", "INFO", *args]


@dataclasses.dataclass
class Bench:
    """One test's world: a database, a namespace for its runs, processes to stop at the end."""

    cp: Any
    release_ns: str
    kubeconfig: Path
    namespace: str
    db_url: str
    sealing_key: Path
    processes: list[Process] = dataclasses.field(default_factory=list)
    operators: int = 0

    # -- processes --------------------------------------------------------------------------

    def operator(self, *, wait: bool = True, **env: str) -> Process:
        """``ferryman operator --all-namespaces`` under the chart's RBAC (as the chart runs it)."""
        self.operators += 1
        identity = f"operator-{self.operators}-{os.getpid()}"
        port = free_port()
        environment = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "FERRYMAN_DATABASE_URL": self.db_url,
            "FERRYMAN_OPERATOR_IDENTITY": identity,
            "FERRYMAN_OPERATOR_LEASE_NAMESPACE": self.release_ns,
            "FERRYMAN_OPERATOR_LEASE_DURATION": "4",
            "FERRYMAN_OPERATOR_STATUS_INTERVAL": "1",
            "FERRYMAN_OPERATOR_POOL_INTERVAL": "1",
            "FERRYMAN_SEALING_KEY_FILE": str(self.sealing_key),
            "FERRYMAN_OPERATOR_DESTINATION_SCHEMAS": DESTINATION_SCHEMAS,
            **env,
        }
        process = Process(
            ferryman("operator", "--all-namespaces", "--liveness-port", str(port)),
            environment,
            identity,
        )
        process.identity = identity  # type: ignore[attr-defined]
        process.port = port  # type: ignore[attr-defined]
        self.processes.append(process)
        if wait:
            self.wait_leader(process)
        return process

    def leader(self) -> str | None:
        result = self.cp.kubectl(
            "get",
            "lease",
            LEASE,
            "-n",
            self.release_ns,
            "-o",
            "jsonpath={.spec.holderIdentity}",
            check=False,
        )
        return result.stdout.strip() or None if result.returncode == 0 else None

    def wait_leader(self, process: Process, timeout: float = COLD_START) -> None:
        """Wait until ``process`` holds the Lease (the default bounds a cold start)."""

        def leads() -> bool:
            if not process.alive():
                raise Hopeless(f"{process.name} exited:\n{process.output()}")
            identity: str = process.identity  # type: ignore[attr-defined]
            return self.leader() == identity

        eventually(leads, timeout, f"{process.name} to hold the Lease")

    def wait_standby(self, process: Process, timeout: float = COLD_START) -> None:
        """Wait until ``process`` stands by: it has started, read the Lease and found it held by
        another (it logs "waiting for Lease" once, after its first try). Its start is as slow as
        a leader's, so the same bound."""

        def stands_by() -> bool:
            if not process.alive():
                raise Hopeless(f"{process.name} exited:\n{process.output()}")
            return "waiting for Lease" in process.output()

        eventually(stands_by, timeout, f"{process.name} to stand by for the Lease")

    def workers(
        self,
        count: int = 2,
        lanes: str = "migrations:2",
        pool_size: int | None = None,
        ports: list[int] | None = None,
    ) -> list[Process]:
        """``count`` workers; with ``ports``, worker i serves /metrics on ``ports[i]``."""
        sized = ["--pool-size", str(pool_size)] if pool_size is not None else []
        env = {
            **{k: v for k, v in os.environ.items() if k != "KUBECONFIG"},  # no API rights
            "FERRYMAN_DATABASE_URL": self.db_url,
            "FERRYMAN_SEALING_KEY_FILE": str(self.sealing_key),
            "FERRYMAN_POLL_INTERVAL": "1",
            "FERRYMAN_DESTINATION_SCHEMAS": DESTINATION_SCHEMAS,
        }
        started = [
            Process(
                ferryman("worker", "--lanes", lanes, *sized),
                {**env, **({"FERRYMAN_METRICS_PORT": str(ports[i])} if ports else {})},
                f"worker-{i}",
            )
            for i in range(count)
        ]
        self.processes += started
        return started

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate(timeout=15)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.output()[-6000:]}" for p in self.processes)

    # -- objects ----------------------------------------------------------------------------

    def secret(
        self,
        token: str,
        name: str = "democrm-token",
        hosts: str | None = "http://127.0.0.1:*",
        namespace: str | None = None,
    ) -> None:
        """Create (or replace) the Secret in the run's namespace (or ``namespace``), bound to
        ``hosts`` (the demo CRM's loopback; None: no binding annotation)."""
        annotations = {"ferryman.dev/hosts": hosts} if hosts is not None else {}
        manifest = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": namespace or self.namespace,
                "annotations": annotations,
            },
            "stringData": {"token": token},
        }
        self.cp.kubectl("apply", "-f", "-", input=json.dumps(manifest))

    def apply(self, manifest: dict[str, Any], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        result: subprocess.CompletedProcess[str] = self.cp.kubectl(
            "apply", "-n", self.namespace, "-f", "-", input=json.dumps(manifest), **kwargs
        )
        return result

    def get(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.cp.kubectl_json("get", "mrun", name, "-n", self.namespace)
        return result

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.get(name).get("status") or {})

    def wait_state(self, name: str, state: str, timeout: float = 90) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            found = self.status(name)
            if found.get("state") in _END - {state}:
                raise Hopeless(f"{name} ended {found}")
            return found if found.get("state") == state else None

        result: dict[str, Any] = eventually(reached, timeout, f"{name} to be {state}")
        return result

    def events(self, name: str) -> list[dict[str, Any]]:
        found = self.cp.kubectl_json(
            "get", "events", "-n", self.namespace, "--field-selector", f"involvedObject.name={name}"
        )
        # in the order they were created (timestamps have whole seconds; etcd's revisions do not)
        return sorted(found["items"], key=lambda e: int(e["metadata"]["resourceVersion"]))

    def reasons(self, name: str) -> list[str]:
        return [event["reason"] for event in self.events(name)]


_END = {"Succeeded", "Failed", "Cancelled"}


def table(bench: Bench, *args: str) -> list[dict[str, str]]:
    """``kubectl get migrationruns`` as rows of {COLUMN: cell}."""
    text = bench.cp.kubectl("get", "migrationruns", "-n", bench.namespace, *args).stdout
    header, *rows = text.splitlines()
    starts = [header.index(word) for word in header.split()]
    cut = [*starts[1:], None]
    return [
        {
            header[s:e].strip() if e else header[s:].strip(): row[s:e].strip()
            for s, e in zip(starts, cut, strict=True)
        }
        for row in rows
    ]


def run_manifest(
    name: str, url: str, workspace: str = "acme", example: bool = False, **spec: Any
) -> dict[str, Any]:
    """A MigrationRun: examples/run.yaml with the demo CRM's URL (``example``), or a short one."""
    if example:
        document: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
        document["metadata"] = {"name": name}
        document["spec"]["source"]["baseURL"] = url
        document["spec"]["workspace"] = workspace
    else:
        document = {
            "apiVersion": "ferryman.dev/v1alpha1",
            "kind": "MigrationRun",
            "metadata": {"name": name},
            "spec": {
                "workspace": workspace,
                "source": {
                    "provider": "democrm",
                    "baseURL": url,
                    "credentialsSecretRef": {"name": "democrm-token"},
                },
            },
        }
    document["spec"].update(spec)
    return document


@contextlib.contextmanager
def bench(
    cp: Any, release_ns: str, kubeconfig: Path, namespace: str, db_url: str, tmp: Path
) -> Iterator[Bench]:
    """A bench whose runs are deleted (while its operator still runs) and processes stopped."""
    from cryptography.fernet import Fernet

    world = Bench(cp, release_ns, kubeconfig, namespace, db_url, tmp / "sealing-key")
    world.sealing_key.write_bytes(Fernet.generate_key())
    try:
        yield world
    finally:
        try:
            _delete_runs(cp, world, namespace)
        finally:
            world.stop()
            sys.stderr.write(world.logs())  # pytest shows it when the test failed
            for process in world.processes:
                process.remove()


def _delete_runs(cp: Any, world: Bench, namespace: str) -> None:
    """Delete the bench's runs while its operator runs (or drop their finalizers, as the README
    tells a user to, when none runs)."""
    cp.kubectl("delete", "mrun", "--all", "-n", namespace, "--wait=false", check=False)
    alive = [p for p in world.processes if p.name.startswith("operator") and p.alive()]
    if alive:
        with contextlib.suppress(AssertionError):
            eventually(
                lambda: not cp.kubectl_json("get", "mrun", "-n", namespace)["items"],
                20,
                "runs gone",
            )
        return
    for item in cp.kubectl_json("get", "mrun", "-n", namespace)["items"]:
        name = item["metadata"]["name"]
        patch = '{"metadata":{"finalizers":null}}'
        cp.kubectl("patch", "mrun", name, "-n", namespace, "--type=merge", "-p", patch, check=False)


class SocketProxy:
    """A unix-socket relay in front of the embedded PostgreSQL: ``url`` reaches the database
    through it, ``cut()`` is an outage (listener closed, every connection dropped),
    ``restore()`` ends it. Only the processes given ``url`` see the outage."""

    def __init__(self, db_url: str, folder: Path) -> None:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(db_url)
        self._target = str(Path(str(params["host"])) / ".s.PGSQL.5432")
        self._folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.url = make_conninfo(db_url, host=str(folder))
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        path = self._folder / ".s.PGSQL.5432"
        path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        (self._folder / ".s.PGSQL.5432").unlink(missing_ok=True)
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self._target)
            self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def restart_apiserver(cp: Any, down_for: float = 2.0) -> None:
    """Stop kube-apiserver (SIGTERM), wait ``down_for`` seconds, start it again with the same
    command line, and record the new process in the control plane's state.json (so ``down``
    stops it); returns once it answers /readyz."""
    path = cp.state_dir / "state.json"
    state = json.loads(path.read_text())
    [entry] = [p for p in state["processes"] if p["name"] == "kube-apiserver"]
    os.kill(int(entry["pid"]), signal.SIGTERM)
    eventually(
        lambda: not Path(f"/proc/{entry['pid']}").exists() or _zombie(int(entry["pid"])),
        30,
        "kube-apiserver to stop",
    )
    time.sleep(down_for)
    log = cp.state_dir / "logs" / "kube-apiserver.log"
    started = subprocess.run(  # in the background of a shell that exits: not our child to reap
        ["sh", "-c", f'setsid "$@" </dev/null >>"{log}" 2>&1 & echo $!', "sh", *entry["argv"]],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(started.stdout.strip())
    stat = Path(f"/proc/{pid}/stat").read_text()
    entry["pid"], entry["started"] = pid, stat.rsplit(")", 1)[1].split()[19]
    path.write_text(json.dumps(state))
    eventually(
        lambda: cp.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
        60,
        "kube-apiserver to be ready",
    )


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def pool_objects(
    namespace: str, lanes: str, replicas: int, pool_size: int | None = None
) -> list[dict[str, Any]]:
    labels = {"ferryman.dev/workers": "ferryman", "app": "ferryman-worker"}
    data = {"lanes": lanes, "replicas": str(replicas)}
    if pool_size is not None:
        data["poolSize"] = str(pool_size)
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "ferryman-pool",
                "namespace": namespace,
                "labels": {"ferryman.dev/pool-spec": "ferryman"},
            },
            "data": data,
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "ferryman-worker", "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "ferryman-worker"}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "worker",
                                "image": "localhost/ferryman:test",
                                "env": [{"name": "FERRYMAN_LANES", "value": "migrations:1"}],
                            }
                        ]
                    },
                },
            },
        },
    ]
