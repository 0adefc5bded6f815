"""Building the pinned programs with the Go toolchain into the cache."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .common import ControlPlaneError, format_seconds, log, tail
from .versions import BUILDS, NODE_BINARIES, VERSIONS, GoBuild


def cache_dir() -> Path:
    if override := os.environ.get("FERRYMAN_CACHE_DIR"):
        return Path(override).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().resolve() / "ferryman"


def cp_cache() -> Path:
    return cache_dir() / "controlplane"


def binary_path(name: str) -> Path:
    return cp_cache() / "bin" / f"{name}-{VERSIONS[name]}"


def binaries(node: bool = False) -> dict[str, Path]:
    """The control plane's binaries, and the node's too when `node`."""
    return {name: binary_path(name) for name in VERSIONS if node or name not in NODE_BINARIES}


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


def build(jobs: int, node: bool = False) -> dict[str, Path]:
    """Build every missing binary (the node's too when `node`); return their paths."""
    missing = [
        spec
        for spec in BUILDS
        if (node or not spec.node) and any(not binary_path(b).exists() for b, _ in spec.binaries)
    ]
    if missing:
        with build_lock():
            for spec in missing:
                todo = [(b, pkg) for b, pkg in spec.binaries if not binary_path(b).exists()]
                if todo:  # another process may have built them while we waited for the lock
                    build_group(spec, todo, jobs)
    return binaries(node)


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


def default_jobs() -> int:
    return int(os.environ.get("FERRYMAN_BUILD_JOBS") or os.cpu_count() or 2)
