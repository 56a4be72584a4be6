"""The MPI Operator as a Deployment on the genuine node, as its release runs it, and the
Services in front of the operators that run on the host.

Its module's own `manifests/base` (ServiceAccount, ClusterRole and binding, Deployment in
`kubeflow`; its CRD is installed with the other operators') is applied with the image
`node_images.build_operator_image` makes of its static binary. Its health server listens on
port 8080, fixed in its code (`cmd/mpi-operator/app/server.go`): in a pod that port is the
pod's own, not the host's.

An operator that pods call (Trainer's status server, `operators.HOST_SERVICES`) runs on the
host; its Service has no selector and an EndpointSlice with the host's
address on the node's bridge, so pods reach it by its name through kube-proxy, as a cluster's
pods reach the operator's pod.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from cluster import processes

NAMESPACE = "kubeflow"
DEPLOYMENT = "mpi-operator"
#: The MPI Operator's arguments besides its release's (`-alsologtostderr`): its lease where the
#: host process keeps it, and no metrics server.
ARGS = ("--lock-namespace=mpi-operator", "--monitoring-port=0")
READY_TIMEOUT_S = 120.0


def manifests(rendered: str, image: str) -> list:
    """The release's objects (`rendered`: `kubectl kustomize` of its manifests/base) less its
    CRD, its Deployment on `image` (never pulled) with `ARGS`."""
    documents = []
    for document in yaml.safe_load_all(rendered):
        if not document or document["kind"] == "CustomResourceDefinition":
            continue
        if document["kind"] == "Deployment":
            container = document["spec"]["template"]["spec"]["containers"][0]
            container.update(image=image, imagePullPolicy="Never",
                             args=[*container.get("args", ()), *ARGS])
        documents.append(document)
    return documents


def deploy_mpi_operator(bed, source: Path, image: str) -> None:
    """Applies the MPI Operator's release (its module's `source`) on `image`."""
    rendered = bed.kubectl_run("kustomize", str(source / "manifests" / "base")).stdout
    bed.kubectl_run("apply", "--server-side", "-f", "-",
                    stdin=yaml.safe_dump_all(manifests(rendered, image)))


def wait_for_mpi_operator(bed) -> None:
    """Waits until the MPI Operator's pod has started its workers (its log says so; until its
    container runs there is no log)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while "Started workers" not in bed.kubectl_run(
            "logs", f"deployment/{DEPLOYMENT}", "-n", NAMESPACE, check=False).stdout:
        if time.monotonic() > deadline:
            raise processes.StartFailed(f"the MPI Operator's pod did not start its workers in "
                                        f"{READY_TIMEOUT_S:.0f} s")
        time.sleep(1.0)


def host_service(bed, service: tuple, port: int, host_ip: str) -> None:
    """Applies `service` (`(namespace, name)`) on `port`, its one endpoint `host_ip`:`port`."""
    namespace, name = service
    meta = {"name": name, "namespace": namespace}
    bed.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"ports": [{"name": "https", "port": port, "targetPort": port}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {**meta, "name": f"{name}-host",
                      "labels": {"kubernetes.io/service-name": name}},
         "addressType": "IPv4", "ports": [{"name": "https", "port": port}],
         "endpoints": [{"addresses": [host_ip]}]}]))
