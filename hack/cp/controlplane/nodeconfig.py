"""The node's settings: its names, where its state lives, and the configuration of containerd,
kubelet and the CNI bridge. Each setting that differs from a default was required on a cgroup-v1
machine without systemd and without CAP_SYS_RESOURCE, or keeps the node's state out of the host's
directories; docs/development.md lists each with the error it fixes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .common import ControlPlaneError
from .images import PAUSE_IMAGE
from .processes import State

NODE_NAME = "localhost"  # resolves to 127.0.0.1 everywhere, where kubelet listens (see docs)
BRIDGE = "ferryman0"
SUBNET = "10.217.0.0/24"
NODE_PROCESSES = ("containerd", "kube-scheduler", "kubelet")
NODE_TOOLS = ("kubelet", "kube-scheduler", "containerd", "containerd-shim-runc-v2", "ctr")


def node_dir(state: State) -> Path:
    return state.directory / "node"


def socket_path(state: State) -> Path:
    return node_dir(state) / "containerd.sock"


# Unix socket paths are limited (containerd refuses more than 104 bytes); the longest of the
# node's are containerd's ttrpc socket and kubelet's pod-resources socket.
LONGEST_SOCKET = "node/kubelet/pod-resources/kubelet.sock"
MAX_STATE_DIR = 104 - 1 - len(LONGEST_SOCKET)


def check_path_length(directory: Path) -> None:
    length = len(str(directory))
    if length > MAX_STATE_DIR:
        raise ControlPlaneError(
            f"the state directory {directory} is {length} characters long; the node's "
            f"unix sockets need it at most {MAX_STATE_DIR}: use a shorter --state-dir"
        )


def write_cni_config(directory: Path) -> None:
    """A bridge of our own name and subnet; no NAT (ipMasq false: no iptables rule, and pods on
    this network reach only this machine); IP allocations kept in the node's directory."""
    conflist = {
        "cniVersion": "1.0.0",
        "name": "ferryman",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": SUBNET}]],
                    "dataDir": str(directory / "cni" / "ipam"),
                },
            }
        ],
    }
    (directory / "cni" / "net.d" / "10-ferryman.conflist").write_text(json.dumps(conflist))


def containerd_config(state: State, cni_bin: Path) -> str:
    base = node_dir(state) / "containerd"
    sock = socket_path(state)
    return f"""\
version = 3
root = "{base / "root"}"
state = "{base / "state"}"
imports = []

[grpc]
  address = "{sock}"

[ttrpc]
  address = "{sock}.ttrpc"

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{PAUSE_IMAGE}"

  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["{cni_bin}"]
      conf_dir = "{node_dir(state) / "cni" / "net.d"}"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      SystemdCgroup = false

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

  [plugins.'io.containerd.nri.v1.nri']
    disable = true

  [plugins.'io.containerd.internal.v1.opt']
    path = "{base / "opt"}"

  [plugins.'io.containerd.image-verifier.v1.bindir']
    bin_dir = "{base / "opt" / "image-verifier"}"
"""


def kubelet_config(state: State, port: int, healthz_port: int) -> dict[str, Any]:
    directory = node_dir(state)
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,  # kubelet >= 1.35 refuses cgroup v1 hosts without it
        "cgroupDriver": "cgroupfs",  # no systemd
        "failSwapOn": False,  # CI machines have swap
        "containerRuntimeEndpoint": f"unix://{socket_path(state)}",
        "address": "127.0.0.1",  # the kubelet API stays off the network
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(state.directory / "pki" / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "makeIPTablesUtilChains": False,  # else KUBE-* chains and a DROP rule in the host's tables
        "podLogsDir": str(directory / "pod-logs"),
        "volumePluginDir": str(directory / "volume-plugins"),
        # local images cannot be pulled again: never garbage-collect them
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # a developer's disk is often fuller than kubelet's defaults allow (pods would be evicted)
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
    }
