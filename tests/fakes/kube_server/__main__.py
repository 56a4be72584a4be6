"""Serves the stateful API server as a program, for clients outside the tests (the benchmarks).

    python -m fakes.kube_server --kubeconfig-out FILE    # run from tests/

Writes a kubeconfig for the server to FILE, prints its URL on one line and
serves (no operator: a client writes job status through `.../status`) until
SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

import yaml

from fakes.kube_server.server import KubeServer


def kubeconfig(url: str) -> dict:
    """A kubeconfig with one context, `kfdist-test`, for the server at `url`."""
    return {"apiVersion": "v1", "kind": "Config", "current-context": "kfdist-test",
            "clusters": [{"name": "kfdist-test", "cluster": {"server": url}}],
            "users": [{"name": "kfdist-test", "user": {}}],
            "contexts": [{"name": "kfdist-test",
                          "context": {"cluster": "kfdist-test", "user": "kfdist-test",
                                      "namespace": "default"}}]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fakes.kube_server")
    parser.add_argument("--kubeconfig-out", required=True, help="where to write its kubeconfig")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with KubeServer() as server:
        with open(args.kubeconfig_out, "w") as f:
            yaml.safe_dump(kubeconfig(server.url), f)
        print(server.url, flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
