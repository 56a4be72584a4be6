#!/usr/bin/env bash
# Starts a test bed in DIR and returns once it is ready; DIR/kubeconfig is the administrator's.
#
#   bash tests/cluster/up.sh DIR [--stack node|control-plane|trainer-v2.1] [--with-operators]
#                            [--with-kfp]
#   kubectl --kubeconfig DIR/kubeconfig get nodes -o wide
#
# `node` (the default): etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the
# genuine node (containerd, the kubelet, kube-proxy, CoreDNS, the volume provisioner);
# `--with-operators` adds the operators, `--with-kfp` Kubeflow Pipelines' backend and UI
# (tests/cluster/kfp.py: DIR/kfp-host holds its API's address, DIR/kfp-ui the UI's, to open in a
# browser). `control-plane` runs no node; `trainer-v2.1` is the genuine node with Trainer v2.1
# and JobSet v0.10 alone. One genuine node runs per machine. Builds the binaries first when the
# cache lacks them (tests/cluster/build.sh). Runs with $PYTHON, else the project's .venv, else
# `python`: an interpreter with the project's test packages. Stop it with
# `bash tests/cluster/down.sh DIR`.
set -euo pipefail
usage="usage: bash tests/cluster/up.sh DIR [--stack STACK] [--with-operators] [--with-kfp]"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
. "$here/python.sh"
PYTHONPATH="$here/..${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m cluster.bed up "$@"
