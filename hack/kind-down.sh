#!/usr/bin/env bash
# Delete the kind cluster that hack/kind-up.sh created (CLUSTER, default: ferryman).
set -euo pipefail
kind delete cluster --name "${CLUSTER:-ferryman}"
