#!/usr/bin/env bash
# Stops the test bed in DIR: every process it started, its pods and containers, their network,
# mounts and iptables rules.
#
#   bash tests/cluster/down.sh DIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: bash tests/cluster/down.sh DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
. "$here/python.sh"
PYTHONPATH="$here/..${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m cluster.bed down "$1"
