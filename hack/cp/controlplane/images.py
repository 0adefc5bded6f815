"""Images on the node. Nothing can be pulled here, so the sandbox ("pause") image is built from
hack/cp/pause and assembled as an OCI archive, and workload images are imported from podman; both
go into the node's containerd, namespace k8s.io (the one the CRI plugin uses)."""

from __future__ import annotations

import hashlib
import io
import json
import platform
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from .common import REPO, ControlPlaneError, log
from .gobuild import cp_cache, go_command, go_env

PAUSE_IMAGE = "localhost/pause:3.10"
PAUSE_SOURCE = REPO / "hack" / "cp" / "pause"
NAMESPACE = "k8s.io"


def pause_binary() -> Path:
    """The static pause binary, built once per version of its source (keyed by its hash)."""
    digest = hashlib.sha256()
    for name in ("go.mod", "main.go"):
        digest.update((PAUSE_SOURCE / name).read_bytes())
    binary = cp_cache() / "bin" / f"pause-{digest.hexdigest()[:12]}"
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = binary.with_name(f".{binary.name}.partial")
    cmd = [go_command(), "build", "-trimpath", "-ldflags=-s -w", "-o", str(partial), "."]
    result = subprocess.run(
        cmd, cwd=PAUSE_SOURCE, env=go_env(), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise ControlPlaneError(f"building the pause binary failed:\n{result.stderr}")
    partial.replace(binary)
    return binary


def go_arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def oci_archive(path: Path, name: str, files: dict[str, bytes], entrypoint: list[str]) -> None:
    """An OCI image layout in a tar (what `ctr images import` reads): one layer holding `files`
    (path -> content, all executable), named `name` for containerd."""
    layer = tar_bytes({name: (content, 0o755) for name, content in files.items()})
    layer_digest = f"sha256:{hashlib.sha256(layer).hexdigest()}"
    image_config = {
        "architecture": go_arch(),
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }
    blobs: dict[str, bytes] = {}

    def blob(media_type: str, data: bytes) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        blobs[f"blobs/sha256/{digest}"] = data
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    manifest: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": blob("application/vnd.oci.image.config.v1+json", encode(image_config)),
        "layers": [blob("application/vnd.oci.image.layer.v1.tar", layer)],
    }
    descriptor = blob(manifest["mediaType"], encode(manifest))
    descriptor["platform"] = {"architecture": go_arch(), "os": "linux"}
    descriptor["annotations"] = {
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
    }
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [descriptor],
    }
    entries = {"oci-layout": encode({"imageLayoutVersion": "1.0.0"}), "index.json": encode(index)}
    path.write_bytes(tar_bytes({k: (v, 0o644) for k, v in {**entries, **blobs}.items()}))


def encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def tar_bytes(files: dict[str, tuple[bytes, int]]) -> bytes:
    """A reproducible tar: fixed owner and time, so the same content gives the same digest."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, (content, mode) in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(content), mode, 0
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def ctr_import(ctr: Path, address: str, archive: Path) -> None:
    cmd = [
        str(ctr),
        "--address",
        address,
        "--namespace",
        NAMESPACE,
        "images",
        "import",
        str(archive),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)
    if result.returncode != 0:
        raise ControlPlaneError(f"ctr images import failed:\n{result.stdout}{result.stderr}")


def import_pause(ctr: Path, address: str, work: Path) -> None:
    archive = work / "pause.oci.tar"
    oci_archive(archive, PAUSE_IMAGE, {"pause": pause_binary().read_bytes()}, ["/pause"])
    ctr_import(ctr, address, archive)
    archive.unlink()


def load_image(ctr: Path, address: str, ref: str, work: Path) -> None:
    """Copy a podman image into the node's containerd (`podman save`, then `ctr images import`)."""
    podman = shutil.which("podman")
    if podman is None:
        raise ControlPlaneError("load-image needs podman on PATH (apt-get install podman)")
    with tempfile.TemporaryDirectory(dir=work, prefix="load-image-") as scratch:
        archive = Path(scratch) / "image.tar"
        save = [podman, "save", "--format", "docker-archive", "--output", str(archive), ref]
        result = subprocess.run(save, capture_output=True, text=True, check=False, timeout=600)
        if result.returncode != 0:
            raise ControlPlaneError(
                f"podman save {ref} failed (build or tag it first):\n{result.stderr}"
            )
        ctr_import(ctr, address, archive)
    log(f"loaded {ref} into the node's containerd (namespace {NAMESPACE})")
