"""The Node object of the test bed's one node, and the heartbeats that keep it Ready.

Registered as the kubelet registers itself (create, then status), renewed every
`HEARTBEAT_S` through its Lease in `kube-node-lease` and its Ready condition, so that the
controller manager's node lifecycle controller keeps it Ready and untainted.
"""

from __future__ import annotations

import datetime
import os
import platform
import threading
from typing import Any, Dict

from cluster.node_agent.kube import ApiError, Kube
from cluster.node_agent.container_state import now

HEARTBEAT_S = 10.0
LEASE_SECONDS = 40
PODS_CAPACITY = "110"


def node_object(name: str, ip: str) -> Dict[str, Any]:
    """The Node as the kubelet registers it (labels and an empty spec)."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64"}}, "spec": {}}


def node_status(name: str, ip: str, kubelet_port: int, runtime_version: str,
                kubelet_version: str) -> Dict[str, Any]:
    """The node's status: capacity of this machine, Ready, its address and kubelet port; the
    kubelet version `kubectl get nodes` shows is the control plane's."""
    memory_kib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024
    resources = {"cpu": str(os.cpu_count() or 1), "memory": f"{memory_kib}Ki",
                 "pods": PODS_CAPACITY, "ephemeral-storage": "100Gi"}
    stamp = now()

    def condition(kind: str, status: str, reason: str, message: str) -> Dict[str, Any]:
        return {"type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}

    return {
        "capacity": resources, "allocatable": resources,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                      "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                      "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID",
                      "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")],
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "",
                     "kernelVersion": platform.release(), "osImage": "kfdist test bed",
                     "containerRuntimeVersion": runtime_version,
                     "kubeletVersion": kubelet_version, "kubeProxyVersion": "",
                     "operatingSystem": "linux", "architecture": "amd64"}}


class NodeHeart:
    """Registers the node and keeps it Ready until `stop`."""

    def __init__(self, kube: Kube, name: str, ip: str, kubelet_port: int, runtime_version: str):
        self.kube, self.name, self.ip = kube, name, ip
        self.port, self.runtime_version = kubelet_port, runtime_version
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="node-heartbeat", daemon=True)

    def register(self) -> None:
        try:
            self.kube.create("/api/v1/nodes", node_object(self.name, self.ip))
        except ApiError as error:
            if error.status != 409:
                raise
        self.kubelet_version = self.kube.get("/version")["gitVersion"]
        self._post_status()
        self._renew_lease()
        self._thread.start()

    def _post_status(self) -> None:
        self.kube.merge_patch(f"/api/v1/nodes/{self.name}/status", {"status": node_status(
            self.name, self.ip, self.port, self.runtime_version, self.kubelet_version)})

    def _renew_lease(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.name}"
        renew = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {"holderIdentity": self.name, "leaseDurationSeconds": LEASE_SECONDS,
                "renewTime": renew}
        try:
            self.kube.merge_patch(path, {"spec": spec})
        except ApiError as error:
            if error.status != 404:
                raise
            self.kube.create("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name}, "spec": spec})

    def _beat(self) -> None:
        while not self._stopping.wait(HEARTBEAT_S):
            try:
                self._renew_lease()
                self._post_status()
            except Exception:  # the API server may be going away with the bed
                continue

    def stop(self) -> None:
        self._stopping.set()
