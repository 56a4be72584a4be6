"""`python -m cluster.node_agent --root DIR --kubeconfig K --port P --bed-id ID`: runs the node
agent until SIGTERM, then stops (the bed's containers are removed by `bed.stop`)."""

from __future__ import annotations

import argparse
import logging
import signal
import shutil
import threading
from pathlib import Path

from cluster.node_agent.agent import Agent
from cluster.node_agent.kube import Kube
from cluster.node_agent.kubelet_http import KubeletServer
from cluster.node_agent.runtime import CONTAINERS_FILE, Podman

NODE_NAME = "kfdist-test-node"


def main() -> None:
    parser = argparse.ArgumentParser(prog="node_agent", allow_abbrev=False)
    parser.add_argument("--root", required=True, type=Path, help="the test bed's directory")
    parser.add_argument("--kubeconfig", required=True, help="the administrator's kubeconfig")
    parser.add_argument("--port", required=True, type=int, help="the kubelet port (logs)")
    parser.add_argument("--bed-id", required=True, help="labels the bed's containers")
    parser.add_argument("--node-name", default=NODE_NAME, help="the Node's name")
    parser.add_argument("--host-service", action="append", default=[], metavar="NAMESPACE/NAME",
                        help="a Service whose process runs on the host (an operator's): its name "
                             "resolves to the pods' gateway; repeatable")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    podman = Podman(shutil.which("podman") or "podman", args.bed_id,
                    args.root / CONTAINERS_FILE)
    agent = Agent(Kube(args.kubeconfig), podman, args.root, args.node_name, args.port,
                  host_services=[tuple(s.split("/", 1)) for s in args.host_service])
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    server = KubeletServer(args.port, args.root / "pki", podman.binary, agent.find_container)
    agent.start()  # the node is Ready once registered: its kubelet port already answers
    logging.info("node %s ready; kubelet port %d", args.node_name, args.port)
    stopped.wait()
    server.close()
    agent.stop()


if __name__ == "__main__":
    main()
