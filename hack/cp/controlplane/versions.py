"""The pinned versions (the only place they are written) and how each program is built."""

from __future__ import annotations

import dataclasses

# The pinned versions: the only place they are written.
KUBERNETES = "v1.37.2"  # kube-apiserver, kube-controller-manager, kubectl (k8s.io/kubernetes)
ETCD = "v3.7.3"  # go.etcd.io/etcd/server/v3; Kubernetes 1.37 is tested against etcd 3.7
HELM = "v4.3.2"  # helm.sh/helm/v4; built against the same k8s.io libraries (v0.37.2)
# The node (`up --node`): kubelet and kube-scheduler from KUBERNETES, and containerd 2 (it answers
# kubelet's RuntimeConfig call, which kubelet 1.38 requires; Debian's 1.6 is end-of-life).
CONTAINERD = "v2.4.2"  # github.com/containerd/containerd/v2


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
    node: bool = False  # part of the node: built only by `build --node` / `up --node`


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
    GoBuild(  # its own wrapper module, so the control plane's go.sum and build stay as they are
        name="kubernetes-node",
        module="k8s.io/kubernetes",
        version=KUBERNETES,
        binaries=(
            ("kubelet", "k8s.io/kubernetes/cmd/kubelet"),
            ("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
        ),
        tags="selinux,notest,grpcnotrace",
        ldflags=kube_ldflags(KUBERNETES),
        staging=True,
        node=True,
    ),
    GoBuild(
        name="containerd",
        module="github.com/containerd/containerd/v2",
        version=CONTAINERD,
        binaries=(
            ("containerd", "github.com/containerd/containerd/v2/cmd/containerd"),
            (
                "containerd-shim-runc-v2",
                "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
            ),
            ("ctr", "github.com/containerd/containerd/v2/cmd/ctr"),
        ),
        tags="no_btrfs,no_devmapper,no_zfs",  # snapshotters that need cgo or host tools
        ldflags=(f"-X github.com/containerd/containerd/v2/version.Version={CONTAINERD}",),
        node=True,
    ),
)
VERSIONS = {name: spec.version for spec in BUILDS for name, _ in spec.binaries}
NODE_BINARIES = frozenset(name for spec in BUILDS if spec.node for name, _ in spec.binaries)
