#!/usr/bin/env python3
"""A real Kubernetes control plane for tests and local use, built from the Go module proxy.

    build   compile etcd, kube-apiserver, kube-controller-manager, kubectl and helm, at the
            versions pinned in hack/cp/controlplane.py, into the cache (never rebuilt once there)
    up      build if needed, then start etcd, kube-apiserver and kube-controller-manager on free
            loopback ports with a fresh CA; write an admin kubeconfig; wait until they are ready
    down    stop what `up` started (by process id) and remove its state directory
    env     print shell exports: KUBECONFIG, PATH and the binaries' paths

The cache is $FERRYMAN_CACHE_DIR, else $XDG_CACHE_HOME/ferryman, else ~/.cache/ferryman. The state
of a running control plane is --state-dir, else $FERRYMAN_CONTROLPLANE_DIR, else .state/controlplane
in the repository. See docs/development.md.
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import dataclasses
import datetime
import fcntl
import http.client
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

# The pinned versions: the only place they are written.
KUBERNETES = "v1.37.2"  # kube-apiserver, kube-controller-manager, kubectl (k8s.io/kubernetes)
ETCD = "v3.7.3"  # go.etcd.io/etcd/server/v3; Kubernetes 1.37 is tested against etcd 3.7
HELM = "v4.3.2"  # helm.sh/helm/v4; built against the same k8s.io libraries (v0.37.2)

REPO = Path(__file__).resolve().parents[2]
SERVICE_CIDR = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# kube-controller-manager controllers started by `up` (docs/development.md explains each).
CONTROLLERS = (
    "serviceaccount-token-controller",
    "serviceaccount-controller",
    "root-ca-certificate-publisher-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "clusterrole-aggregation-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "job-controller",
    "cronjob-controller",
    "ttl-after-finished-controller",
    "resourcequota-controller",
    "disruption-controller",
    "endpointslice-controller",
)


def log(message: str) -> None:
    print(f"[controlplane] {message}", file=sys.stderr, flush=True)


class ControlPlaneError(Exception):
    """A step failed; the message says which and why."""


# --------------------------------------------------------------------------------------------
# Build
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GoBuild:
    """A wrapper module that requires `module` at `version` and builds `binaries` from it."""

    name: str
    module: str
    version: str
    binaries: tuple[tuple[str, str], ...]  # (binary name, Go package)
    tags: str = ""
    ldflags: tuple[str, ...] = ()
    staging: bool = False  # replace every k8s.io staging module with its v0.X.Y release


def kube_ldflags(version: str) -> tuple[str, ...]:
    """The version stamps Kubernetes' own build sets (hack/lib/version.sh)."""
    major, minor = version.lstrip("v").split(".")[:2]
    values = {"gitVersion": version, "gitMajor": major, "gitMinor": minor, "gitTreeState": "clean"}
    packages = ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version")
    return tuple(f"-X {pkg}.{key}={value}" for pkg in packages for key, value in values.items())


BUILDS = (
    GoBuild(
        name="kubernetes",
        module="k8s.io/kubernetes",
        version=KUBERNETES,
        binaries=(
            ("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
            ("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"),
            ("kubectl", "k8s.io/kubernetes/cmd/kubectl"),
        ),
        tags="selinux,notest,grpcnotrace",  # what Kubernetes' release build uses
        ldflags=kube_ldflags(KUBERNETES),
        staging=True,
    ),
    GoBuild(
        name="etcd",
        module="go.etcd.io/etcd/server/v3",
        version=ETCD,
        binaries=(("etcd", "go.etcd.io/etcd/server/v3"),),
    ),
    GoBuild(
        name="helm",
        module="helm.sh/helm/v4",
        version=HELM,
        binaries=(("helm", "helm.sh/helm/v4/cmd/helm"),),
        ldflags=(
            f"-X helm.sh/helm/v4/internal/version.version={HELM}",
            "-X helm.sh/helm/v4/internal/version.metadata=",
            "-X helm.sh/helm/v4/internal/version.gitTreeState=clean",
        ),
    ),
)
VERSIONS = {name: spec.version for spec in BUILDS for name, _ in spec.binaries}


def cache_dir() -> Path:
    if override := os.environ.get("FERRYMAN_CACHE_DIR"):
        return Path(override).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().resolve() / "ferryman"


def cp_cache() -> Path:
    return cache_dir() / "controlplane"


def binary_path(name: str) -> Path:
    return cp_cache() / "bin" / f"{name}-{VERSIONS[name]}"


def binaries() -> dict[str, Path]:
    return {name: binary_path(name) for name in VERSIONS}


def go_env() -> dict[str, str]:
    """The Go toolchain's environment: caches outside the repository, static binaries."""
    env = dict(os.environ)
    env.update(
        GOCACHE=str(cp_cache() / "go-build"),
        GOMODCACHE=str(cp_cache() / "go-mod"),
        GOFLAGS="-modcacherw -buildvcs=false",  # -modcacherw: `rm -rf` of the cache works
        GOWORK="off",
        CGO_ENABLED="0",
    )
    # An older local Go fetches the toolchain the modules ask for, through the module proxy.
    env.setdefault("GOTOOLCHAIN", "auto")
    return env


def go_command() -> str:
    go = os.environ.get("FERRYMAN_GO") or shutil.which("go")
    if not go:
        raise ControlPlaneError("`go` is not on PATH (set FERRYMAN_GO): it is needed to build")
    return go


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """One build at a time per cache (two test sessions may start together)."""
    cp_cache().mkdir(parents=True, exist_ok=True)
    with open(cp_cache() / ".build.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("another build holds the cache lock; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build(jobs: int) -> dict[str, Path]:
    """Build every missing binary; return all binaries' paths."""
    missing = [
        spec for spec in BUILDS if any(not binary_path(b).exists() for b, _ in spec.binaries)
    ]
    if missing:
        with build_lock():
            for spec in missing:
                todo = [(b, pkg) for b, pkg in spec.binaries if not binary_path(b).exists()]
                if todo:  # another process may have built them while we waited for the lock
                    build_group(spec, todo, jobs)
    return binaries()


def build_group(spec: GoBuild, todo: list[tuple[str, str]], jobs: int) -> None:
    started = time.monotonic()
    label = f"{spec.name} {spec.version}"
    log(f"{label}: building {', '.join(b for b, _ in todo)} (go build -p {jobs})")
    src = write_wrapper_module(spec)
    logfile = cp_cache() / "logs" / f"build-{spec.name}-{spec.version}.log"
    logfile.parent.mkdir(parents=True, exist_ok=True)
    total = count_packages(src, [pkg for _, pkg in todo], logfile)
    binary_path(todo[0][0]).parent.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix=".build-", dir=binary_path(todo[0][0]).parent))
    try:
        run_go_build(spec, src, todo, out, Job(label, jobs, logfile, total))
        for name, pkg in todo:
            built = out / (name if len(todo) == 1 else pkg.rsplit("/", 1)[-1])
            os.replace(built, binary_path(name))  # atomic: a partial binary is never "present"
    finally:
        shutil.rmtree(out, ignore_errors=True)
    log(f"{label}: built in {format_seconds(time.monotonic() - started)}")


def write_wrapper_module(spec: GoBuild) -> Path:
    """go.mod of a module that requires spec.module (and, for Kubernetes, the staging modules)."""
    src = cp_cache() / "src" / f"{spec.name}-{spec.version}"
    src.mkdir(parents=True, exist_ok=True)
    upstream = download_go_mod(spec.module, spec.version, src)
    go_line = re.search(r"^go (\S+)", upstream, re.M)
    lines = [f"module ferryman.local/controlplane/{spec.name}", ""]
    lines += [
        f"go {go_line.group(1) if go_line else '1.22'}",
        "",
        f"require {spec.module} {spec.version}",
    ]
    if spec.staging:
        staging_version = "v0." + spec.version.split(".", 1)[1]
        modules = sorted(set(re.findall(r"^\s*(k8s\.io/\S+)\s+=>\s+\./staging/", upstream, re.M)))
        lines += ["", "replace ("] + [f"\t{m} => {m} {staging_version}" for m in modules] + [")"]
    (src / "go.mod").write_text("\n".join(lines) + "\n")  # go.sum is kept: it only grows
    return src


def download_go_mod(module: str, version: str, cwd: Path) -> str:
    """The upstream go.mod of module@version, fetched through the module proxy."""
    with tempfile.TemporaryDirectory(dir=cwd.parent) as empty:  # outside any module
        result = subprocess.run(
            [go_command(), "mod", "download", "-json", f"{module}@{version}"],
            cwd=empty,
            env=go_env(),
            capture_output=True,
            text=True,
            check=False,
        )
    if result.returncode != 0:
        output = result.stdout + result.stderr
        raise ControlPlaneError(f"go mod download {module}@{version} failed:\n{output}")
    return Path(json.loads(result.stdout)["GoMod"]).read_text()


def count_packages(src: Path, packages: list[str], logfile: Path) -> int:
    """Resolve the module graph (fills go.sum) and count the packages to compile."""
    log(f"resolving modules in {src} (downloads go through GOPROXY)")
    cmd = [go_command(), "list", "-mod=mod", "-deps", *packages]
    with open(logfile, "a") as out:
        result = subprocess.run(cmd, cwd=src, env=go_env(), stdout=subprocess.PIPE, stderr=out)
    if result.returncode != 0:
        raise ControlPlaneError(f"go list failed; see {logfile}:\n{tail(logfile)}")
    return len(result.stdout.splitlines())


def run_go_build(
    spec: GoBuild, src: Path, todo: list[tuple[str, str]], out: Path, job: Job
) -> None:
    """go build into `out`; the output goes to the log, a progress line every 30 s."""
    # Several main packages: go names each binary after its package's last element.
    target = str(out / todo[0][0]) if len(todo) == 1 else f"{out}/"
    cmd = [go_command(), "build", "-mod=mod", f"-p={job.jobs}", "-v", "-trimpath"]
    cmd += ["-tags", spec.tags, "-ldflags", " ".join(("-s", "-w", *spec.ldflags))]
    cmd += ["-o", target, *(pkg for _, pkg in todo)]
    with open(job.logfile, "a") as sink:
        sink.write(f"$ {shlex.join(cmd)}\n")
        sink.flush()
        proc = subprocess.Popen(
            cmd, cwd=src, env=go_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        follower = Follower(proc.stdout, sink)
        follower.start()
        report_progress(proc, follower, job)
        follower.join()
    if proc.returncode != 0:
        raise ControlPlaneError(
            f"{job.label}: go build failed; see {job.logfile}:\n{tail(job.logfile)}"
        )


@dataclasses.dataclass(frozen=True)
class Job:
    label: str
    jobs: int
    logfile: Path
    total: int


class Follower(threading.Thread):
    """Copies the build's output to its log and counts the lines (`go build -v`: one a package)."""

    def __init__(self, stream: IO[str] | None, sink: IO[str]) -> None:
        super().__init__(daemon=True)
        self.stream, self.sink, self.lines = stream, sink, 0

    def run(self) -> None:
        for line in self.stream or ():
            self.sink.write(line)
            self.lines += 1


def report_progress(proc: subprocess.Popen[str], follower: Follower, job: Job) -> None:
    started = time.monotonic()
    while True:
        try:
            proc.wait(timeout=30)
            return
        except subprocess.TimeoutExpired:
            elapsed = format_seconds(time.monotonic() - started)
            log(f"{job.label}: {follower.lines}/~{job.total} packages compiled, {elapsed}")


def tail(path: Path, lines: int = 40) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(collections.deque(f, maxlen=lines))
    except FileNotFoundError:
        return ""


def format_seconds(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


# --------------------------------------------------------------------------------------------
# Certificates and kubeconfigs
# --------------------------------------------------------------------------------------------


def make_pki(pki: Path) -> None:
    """Two CAs (the cluster's, and the front proxy's for request-header authentication), the API
    server's serving certificate, client certificates, and the service-account signing key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    pki.mkdir(parents=True, exist_ok=True)
    hosts = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
    hosts += ["kubernetes.default.svc.cluster.local", "127.0.0.1", "10.0.0.1"]
    issued = {  # name: (issuer, common name, organization, server names)
        "apiserver": ("ca", "kube-apiserver", None, hosts),
        "admin": ("ca", "ferryman-admin", "system:masters", None),
        "controller-manager": ("ca", "system:kube-controller-manager", None, None),
        "front-proxy-client": ("front-proxy-ca", "front-proxy-client", None, None),
    }
    cas = {}
    for name in ("ca", "front-proxy-ca"):
        key = ec.generate_private_key(ec.SECP256R1())
        cas[name] = (key, sign(key, f"ferryman-{name}", None, key, None))
        write_pair(pki, name, cas[name][1], key)
    for name, (issuer, common_name, organization, sans) in issued.items():
        key = ec.generate_private_key(ec.SECP256R1())
        ca_key, ca = cas[issuer]
        write_pair(pki, name, sign(key, common_name, organization, ca_key, ca, sans=sans), key)
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    write_key(pki / "sa.key", sa_key)
    public = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (pki / "sa.pub").write_bytes(public)


def sign(
    key: Any,
    common_name: str,
    organization: str | None,
    ca_key: Any,
    ca: Any,
    *,
    sans: list[str] | None = None,
) -> Any:
    """An X.509 certificate for `key`, signed by ca_key (self-signed when ca is None)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    subject = x509.Name(attributes)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject if ca else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=ca is None, path_length=None), critical=True)
    )
    if ca is None:
        usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
        builder = builder.add_extension(usage, critical=True)
    else:
        oids = [ExtendedKeyUsageOID.SERVER_AUTH if sans else ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(oids), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names(sans)), False)
    return builder.sign(ca_key, hashes.SHA256())


def alt_names(hosts: list[str]) -> list[Any]:
    from cryptography import x509

    names: list[Any] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def write_pair(pki: Path, name: str, cert: Any, key: Any) -> None:
    from cryptography.hazmat.primitives import serialization

    (pki / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_key(pki / f"{name}.key", key)


def write_key(path: Path, key: Any) -> None:
    from cryptography.hazmat.primitives import serialization

    encoding, pkcs8 = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
    data = key.private_bytes(encoding, pkcs8, serialization.NoEncryption())
    path.touch(mode=0o600)
    path.write_bytes(data)


def write_kubeconfig(path: Path, server: str, pki: Path, user: str) -> None:
    """A kubeconfig (JSON, which is YAML) with everything embedded; one context, `ferryman`."""

    def data(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "ferryman",
                "cluster": {"server": server, "certificate-authority-data": data("ca.crt")},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": data(f"{user}.crt"),
                    "client-key-data": data(f"{user}.key"),
                },
            }
        ],
        "contexts": [{"name": "ferryman", "context": {"cluster": "ferryman", "user": user}}],
        "current-context": "ferryman",
    }
    path.touch(mode=0o600)
    path.write_text(json.dumps(config, indent=2) + "\n")


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class State:
    """What `up` started, saved in <state-dir>/state.json after every step (so `down` can undo
    a half-finished `up`)."""

    directory: Path
    processes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def file(self) -> Path:
        return self.directory / "state.json"

    def save(self) -> None:
        record = {"processes": self.processes, **self.info}
        temporary = self.file.with_suffix(".tmp")
        temporary.write_text(json.dumps(record, indent=2) + "\n")
        os.replace(temporary, self.file)

    @classmethod
    def load(cls, directory: Path) -> State | None:
        try:
            record = json.loads((directory / "state.json").read_text())
        except FileNotFoundError:
            return None
        processes = record.pop("processes")
        return cls(directory, processes, record)


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (guards against a recycled process id)."""
    if not Path("/proc/self/stat").exists():  # not Linux: existence only, no recycling guard
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "unknown"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # a zombie has finished
        return None
    return fields[19]


def alive(process: dict[str, Any]) -> bool:
    started = start_time(int(process["pid"]))
    return started is not None and started == process["started"]


def spawn(state: State, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
    """Start a daemon in its own session, output to logs/<name>.log; record it."""
    logs = state.directory / "logs"
    logs.mkdir(exist_ok=True)
    with open(logs / f"{name}.log", "ab") as out:
        out.write(f"$ {shlex.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    state.processes.append(
        {"name": name, "pid": proc.pid, "started": start_time(proc.pid), "argv": argv}
    )
    state.save()
    return proc


def stop(process: dict[str, Any], grace: float = 15.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; only if it is still the process we started."""
    pid = int(process["pid"])
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if not alive(process):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while alive(process) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap it if it is our own child
            time.sleep(0.05)
    if alive(process):
        raise ControlPlaneError(f"{process['name']} (pid {pid}) survived SIGKILL")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class StartFailed(ControlPlaneError):
    def __init__(self, name: str, logfile: Path, reason: str) -> None:
        super().__init__(f"{name} {reason}; last lines of {logfile}:\n{tail(logfile, 25)}")
        self.port_taken = "address already in use" in tail(logfile, 25)


def wait_until(
    state: State, proc: subprocess.Popen[bytes], name: str, ready: Callable[[], bool], until: float
) -> None:
    """Poll `ready` until it is true; fail if the process exits or the deadline passes."""
    logfile = state.directory / "logs" / f"{name}.log"
    while not ready():
        if proc.poll() is not None:
            raise StartFailed(name, logfile, f"exited with status {proc.returncode}")
        if time.monotonic() > until:
            raise StartFailed(name, logfile, "did not become ready in time")
        time.sleep(0.25)


def start_retrying(
    state: State,
    name: str,
    start: Callable[[], tuple[subprocess.Popen[bytes], Callable[[], bool]]],
    until: float,
) -> None:
    """Start a daemon on fresh free ports; try again if another process took a port meanwhile."""
    for attempt in range(3):
        proc, ready = start()
        try:
            wait_until(state, proc, name, ready, until)
            return
        except StartFailed as failure:
            stop(state.processes.pop())
            state.save()
            if not failure.port_taken or attempt == 2:
                raise
            log(f"{name}: a port was taken meanwhile; trying other ports")


def http_ok(url: str, context: ssl.SSLContext | None = None, expect: str = "ok") -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            body = response.read().decode()
            return response.status == 200 and expect in body
    except (OSError, http.client.HTTPException):  # URLError is an OSError
        return False


def admin_context(pki: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
    return context


# --------------------------------------------------------------------------------------------
# The control plane's parts
# --------------------------------------------------------------------------------------------


def start_etcd(state: State, tools: dict[str, Path]) -> tuple[subprocess.Popen[bytes], Any]:
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    argv = [
        str(tools["etcd"]),
        "--name=ferryman",
        f"--data-dir={state.directory / 'etcd'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=ferryman={peer}",
        "--unsafe-no-fsync",  # throw-away data: durability buys nothing, fsync costs seconds
        "--log-level=warn",
    ]
    proc = spawn(state, "etcd", argv)
    state.info["etcd"] = client
    return proc, lambda: http_ok(f"{client}/health", expect='"health":"true"')


def start_apiserver(state: State, tools: dict[str, Path]) -> tuple[subprocess.Popen[bytes], Any]:
    pki, port = state.directory / "pki", free_port()
    argv = [
        str(tools["kube-apiserver"]),
        f"--etcd-servers={state.info['etcd']}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        "--endpoint-reconciler-type=none",  # it refuses loopback; no pod would use it anyway
        f"--secure-port={port}",
        f"--cert-dir={pki}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--authorization-mode=Node,RBAC",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        "--profiling=false",
    ]
    proc = spawn(state, "kube-apiserver", argv)
    server = f"https://127.0.0.1:{port}"
    state.info["server"] = server
    context = admin_context(pki)
    return proc, lambda: http_ok(f"{server}/readyz", context)


def start_controller_manager(
    state: State, tools: dict[str, Path]
) -> tuple[subprocess.Popen[bytes], Any]:
    pki, port = state.directory / "pki", free_port()
    kubeconfig = state.directory / "controller-manager.kubeconfig"
    write_kubeconfig(kubeconfig, state.info["server"], pki, "controller-manager")
    argv = [
        str(tools["kube-controller-manager"]),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={state.directory / 'controller-manager'}",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        "--use-service-account-credentials=true",
        "--leader-elect=false",
        f"--controllers={','.join(CONTROLLERS)}",
    ]
    proc = spawn(state, "kube-controller-manager", argv)
    insecure = ssl.create_default_context()  # its serving certificate is self-signed
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    account = f"{state.info['server']}/api/v1/namespaces/default/serviceaccounts/default"
    context = admin_context(pki)

    def ready() -> bool:  # healthy, and the service-account controller has done its first work
        healthy = http_ok(f"https://127.0.0.1:{port}/healthz", insecure)
        return healthy and http_ok(account, context, expect='"name":"default"')

    return proc, ready


def start_watchdog(state: State, pid: int) -> None:
    """A small process that runs `down` when process `pid` (say, a test session) has gone."""
    script = str(Path(__file__).resolve())
    argv = [sys.executable, script, "_watch", f"--state-dir={state.directory}", f"--pid={pid}"]
    spawn(state, "watchdog", argv)


def watch(directory: Path, pid: int) -> None:
    watched = {"name": "watched", "pid": pid, "started": start_time(pid)}
    while (directory / "state.json").exists():
        if not alive(watched):
            log(f"process {pid} has gone: taking the control plane down")
            down(directory)
            return
        time.sleep(1)


# --------------------------------------------------------------------------------------------
# up, down, env
# --------------------------------------------------------------------------------------------


def up(directory: Path, controller_manager: bool, watch_pid: int | None, timeout: float) -> State:
    tools = build(default_jobs())
    prepare(directory)
    state = State(directory, info={"versions": dict(VERSIONS), "bin": {}})
    link_tools(state, tools)
    make_pki(directory / "pki")
    until = time.monotonic() + timeout
    try:
        start_retrying(state, "etcd", lambda: start_etcd(state, tools), until)
        start_retrying(state, "kube-apiserver", lambda: start_apiserver(state, tools), until)
        kubeconfig = directory / "kubeconfig"
        write_kubeconfig(kubeconfig, state.info["server"], directory / "pki", "admin")
        state.info["kubeconfig"] = str(kubeconfig)
        if controller_manager:
            start = lambda: start_controller_manager(state, tools)  # noqa: E731
            start_retrying(state, "kube-controller-manager", start, until)
        if watch_pid:
            start_watchdog(state, watch_pid)
        state.info["env"] = environment(state)
        state.save()
    except BaseException:
        down(directory, keep_logs=True)
        raise
    return state


def prepare(directory: Path) -> None:
    """An empty state directory; a stale one (its processes gone) is cleared first."""
    existing = State.load(directory)
    if existing and any(alive(p) for p in existing.processes):
        raise ControlPlaneError(f"a control plane is already up in {directory} (run `down`)")
    remove_state(directory)
    directory.mkdir(parents=True)
    (directory / MARKER).touch()
    (directory / "logs").mkdir()


MARKER = ".ferryman-controlplane"  # only a directory holding this file is ever deleted


def remove_state(directory: Path) -> None:
    if not directory.exists():
        return
    if not (directory / MARKER).exists() and any(directory.iterdir()):
        raise ControlPlaneError(f"{directory} is not empty and not a control plane's state")
    shutil.rmtree(directory)


def link_tools(state: State, tools: dict[str, Path]) -> None:
    """<state>/bin holds version-free names (kubectl, helm, …) for PATH."""
    bin_dir = state.directory / "bin"
    bin_dir.mkdir()
    for name, path in tools.items():
        (bin_dir / name).symlink_to(path)
        state.info["bin"][name] = str(path)


def environment(state: State) -> dict[str, str]:
    env = {
        "KUBECONFIG": state.info["kubeconfig"],
        "FERRYMAN_CONTROLPLANE_DIR": str(state.directory),
        "FERRYMAN_CONTROLPLANE_BIN": str(state.directory / "bin"),
    }
    for name, path in state.info["bin"].items():
        env[f"FERRYMAN_{name.upper().replace('-', '_')}"] = path
    return env


def down(directory: Path, keep_logs: bool = False) -> list[str]:
    """Stop the recorded processes, newest first (the watchdog first), then remove the state."""
    state = State.load(directory)
    stopped: list[str] = []
    for process in reversed(state.processes if state else []):
        if int(process["pid"]) != os.getpid() and alive(process):
            stop(process)
            stopped.append(f"{process['name']} (pid {process['pid']})")
    if keep_logs:
        (directory / "state.json").unlink(missing_ok=True)
    else:
        remove_state(directory)
    return stopped


def default_state_dir() -> Path:
    override = os.environ.get("FERRYMAN_CONTROLPLANE_DIR")
    return Path(override).resolve() if override else REPO / ".state" / "controlplane"


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def cmd_build(args: argparse.Namespace) -> int:
    if all(path.exists() for path in binaries().values()):
        log(f"all binaries are in the cache: {cp_cache() / 'bin'}")
        return 0
    started = time.monotonic()
    for name, path in build(args.jobs).items():
        log(f"{name:<24} {path}")
    log(f"build done in {format_seconds(time.monotonic() - started)}")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    started = time.monotonic()
    state = up(args.state_dir, not args.no_controller_manager, args.watch_pid, args.timeout)
    log(f"up in {format_seconds(time.monotonic() - started)}: {state.info['server']}")
    log(f"state and logs: {state.directory}")
    log(
        f'use it: eval "$({shlex.quote(str(REPO / "hack" / "controlplane"))} env'
        + (f" --state-dir {shlex.quote(str(args.state_dir))}" if args.state_dir_given else "")
        + ')"; kubectl get ns'
    )
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    stopped = down(args.state_dir)
    log(f"stopped {', '.join(stopped)}" if stopped else f"nothing was running in {args.state_dir}")
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    state = State.load(args.state_dir)
    if state is None or "env" not in state.info:
        raise ControlPlaneError(f"no control plane is up in {args.state_dir} (run `up`)")
    env = state.info["env"]
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")
    print(f'export PATH={shlex.quote(env["FERRYMAN_CONTROLPLANE_BIN"])}:"$PATH"')
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    watch(args.state_dir, args.pid)
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="hack/controlplane",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="{build,up,down,env}")
    build_cmd = sub.add_parser("build", help="compile the binaries into the cache")
    build_cmd.add_argument("--jobs", type=int, default=default_jobs(), help="go build -p")
    build_cmd.set_defaults(func=cmd_build)
    up_cmd = sub.add_parser("up", help="build if needed, start a control plane, wait for it")
    up_cmd.add_argument(
        "--no-controller-manager", action="store_true", help="start only etcd and kube-apiserver"
    )
    up_cmd.add_argument("--watch-pid", type=int, help="run `down` when this process has exited")
    up_cmd.add_argument("--timeout", type=float, default=180.0, help="seconds to be ready")
    up_cmd.set_defaults(func=cmd_up)
    down_cmd = sub.add_parser("down", help="stop what `up` started, remove its state")
    down_cmd.set_defaults(func=cmd_down)
    env_cmd = sub.add_parser("env", help="print KUBECONFIG, PATH and the binaries as exports")
    env_cmd.set_defaults(func=cmd_env)
    watch_cmd = sub.add_parser("_watch")  # internal: the watchdog of `up --watch-pid`
    watch_cmd.add_argument("--pid", type=int, required=True)
    watch_cmd.set_defaults(func=cmd_watch)
    for command in (up_cmd, down_cmd, env_cmd, watch_cmd):
        command.add_argument(
            "--state-dir",
            type=Path,
            help="default: $FERRYMAN_CONTROLPLANE_DIR or .state/controlplane",
        )
    return top


def default_jobs() -> int:
    return int(os.environ.get("FERRYMAN_BUILD_JOBS") or os.cpu_count() or 2)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if hasattr(args, "state_dir"):
        args.state_dir_given = args.state_dir is not None
        args.state_dir = (args.state_dir or default_state_dir()).resolve()
    try:
        return int(args.func(args))
    except ControlPlaneError as error:
        log(f"error: {error}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
