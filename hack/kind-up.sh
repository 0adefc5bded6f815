#!/usr/bin/env bash
# For machines with Docker: create a kind cluster, build the ferryman image from the same
# Dockerfile hack/image uses (on Debian's public base), load it into the cluster and install the
# chart. Needs docker, kind, kubectl and helm on PATH. Re-running is safe (an upgrade).
# Undo with hack/kind-down.sh.
#
#   CLUSTER       kind cluster name (default: ferryman)
#   IMAGE         image to build and load (default: localhost/ferryman:<version>, as hack/image)
#   DATABASE_URL  PostgreSQL URL the pods can reach (from inside the cluster: not the host's
#                 127.0.0.1). Stored in Secret ferryman-database, key url. Unset: an existing
#                 Secret is used, or the script stops before installing and says how.
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=${CLUSTER:-ferryman}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
image=${IMAGE:-localhost/ferryman:$version}
namespace=ferryman
for tool in docker kind kubectl helm; do
    command -v "$tool" >/dev/null || { echo "kind-up: $tool is not on PATH" >&2; exit 1; }
done
kube=(kubectl --context "kind-$cluster")

if ! kind get clusters | grep -qx "$cluster"; then
    kind create cluster --name "$cluster" --wait 120s
fi
"${kube[@]}" get nodes

docker build -t "$image" .
kind load docker-image "$image" --name "$cluster"

"${kube[@]}" create namespace "$namespace" --dry-run=client -o yaml | "${kube[@]}" apply -f -
if [ -n "${DATABASE_URL:-}" ]; then
    "${kube[@]}" -n "$namespace" create secret generic ferryman-database \
        --from-literal=url="$DATABASE_URL" --dry-run=client -o yaml | "${kube[@]}" apply -f -
elif ! "${kube[@]}" -n "$namespace" get secret ferryman-database >/dev/null 2>&1; then
    echo "kind-up: image $image is loaded into kind-$cluster; to install the chart, give the" \
        "database: DATABASE_URL=postgresql://user:pass@host:5432/db hack/kind-up.sh" >&2
    exit 0
fi
helm upgrade --install ferryman charts/ferryman --kube-context "kind-$cluster" \
    --namespace "$namespace" \
    --set "image.repository=${image%:*}" --set "image.tag=${image##*:}" \
    --set image.pullPolicy=IfNotPresent --wait --timeout 5m
