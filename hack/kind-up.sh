#!/usr/bin/env bash
# For machines with Docker: create a kind cluster, build the ferryman image, load it into the
# cluster and install the chart. Needs docker, kind, kubectl and helm on PATH. Re-running is safe.
# Without Docker, use hack/controlplane (no pods run there). Undo with hack/kind-down.sh.
#   CLUSTER  kind cluster name (default: ferryman)     IMAGE  image to build (default: ferryman:dev)
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=${CLUSTER:-ferryman}
image=${IMAGE:-ferryman:dev}
for tool in docker kind kubectl helm; do
    command -v "$tool" >/dev/null || { echo "kind-up: $tool is not on PATH" >&2; exit 1; }
done

if ! kind get clusters | grep -qx "$cluster"; then
    kind create cluster --name "$cluster" --wait 120s
fi
kubectl --context "kind-$cluster" get nodes

# The Dockerfile and the chart arrive with later issues; until then the cluster is all we make.
if [ ! -f Dockerfile ] || [ ! -d charts/ferryman ]; then
    echo "kind-up: cluster kind-$cluster is up; no Dockerfile or charts/ferryman yet, stopping here"
    exit 0
fi
docker build -t "$image" .
kind load docker-image "$image" --name "$cluster"
helm upgrade --install ferryman charts/ferryman --kube-context "kind-$cluster" \
    --namespace ferryman --create-namespace \
    --set "image.repository=${image%:*}" --set "image.tag=${image##*:}" --wait
