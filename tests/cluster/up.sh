#!/usr/bin/env bash
# Starts a test bed (etcd, kube-apiserver, kube-controller-manager, the operators, the node
# agent) in DIR and returns once it is ready; DIR/kubeconfig is the administrator's.
#
#   bash tests/cluster/up.sh DIR && kubectl --kubeconfig DIR/kubeconfig get nodes
#
# Builds the binaries first when the cache lacks them (tests/cluster/build.sh). Run in the
# project's environment (. .venv/bin/activate). Stop it with `bash tests/cluster/down.sh DIR`.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: bash tests/cluster/up.sh DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
PYTHONPATH="$here/..${PYTHONPATH:+:$PYTHONPATH}" exec python -m cluster.bed up "$1"
