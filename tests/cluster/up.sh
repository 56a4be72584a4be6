#!/usr/bin/env bash
# Starts a test bed in DIR and returns once it is ready; DIR/kubeconfig is the administrator's.
#
#   bash tests/cluster/up.sh DIR [--stack all|control-plane|trainer-v2.1|node] [--with-kfp]
#                            [--with-operators]
#   kubectl --kubeconfig DIR/kubeconfig get nodes -o wide
#
# `all` (the default): etcd, kube-apiserver, kube-controller-manager, the operators and the node
# agent; `node`: the control plane, kube-scheduler and the genuine node (containerd, the kubelet,
# kube-proxy, CoreDNS, the volume provisioner). Builds the binaries first when the cache lacks
# them (tests/cluster/build.sh). `--stack node --with-kfp` adds Kubeflow Pipelines' backend and
# UI (tests/cluster/kfp.py); DIR/kfp-host holds its API's address, DIR/kfp-ui the UI's (open it
# in a browser); `--with-operators` adds the
# operators to the genuine node. Runs with $PYTHON, else the
# project's .venv, else `python`: an interpreter with the project's test packages. Stop it with
# `bash tests/cluster/down.sh DIR`.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bash tests/cluster/up.sh DIR [--stack STACK] [--with-kfp]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
. "$here/python.sh"
PYTHONPATH="$here/..${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m cluster.bed up "$@"
