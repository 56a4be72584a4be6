"""The node agent: binds pending pods to the node, runs the ones bound to it, names them.

Pods are watched in every namespace (re-listed when the watch's history is gone). A pending pod
is bound when the node can take it, as the scheduler would decide for one node: its
`nodeSelector` matches the node's labels and it requests no resource the node lacks (a GPU);
otherwise it stays Pending with PodScheduled False, reason Unschedulable, the scheduler's words.
Pods held by `schedulingGates` are left alone.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Dict, Optional

from cluster.node_agent import names, node, volumes
from cluster.node_agent.kube import ApiError, Kube
from cluster.node_agent.container_state import now
from cluster.node_agent.pod_status import TERMINAL
from cluster.node_agent.pod_worker import PodWorker
from cluster.node_agent.runtime import Podman

#: The node's own environment for every container (`Agent.node_env`), in the bed's directory.
NODE_ENV = "node-env.json"
log = logging.getLogger("node-agent")
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods", "hugepages-")


class Agent:
    """The node agent of one test bed.

    Args:
      kube: A client of the bed's API server (as the administrator).
      podman: The bed's container runtime.
      root: The bed's directory (volumes and pods' files below it).
      node_name: The Node's name.
      kubelet_port: The kubelet port (logs).
    """

    def __init__(self, kube: Kube, podman: Podman, root: Path, node_name: str, kubelet_port: int,
                 host_services=()):
        self.kube, self.podman, self.root = kube, podman, Path(root)
        self.host_services = tuple(host_services)
        self.node_name, self.kubelet_port = node_name, kubelet_port
        self.node_ip = "127.0.0.1"
        self.bed_id = podman.bed_id
        self.workers: Dict[str, PodWorker] = {}
        self.services: Dict[str, Dict[str, Any]] = {}
        self._lock = threading.RLock()
        self._addresses: Dict[str, str] = {}
        self._free: list = []
        self._unschedulable: Dict[str, str] = {}
        self.volumes = volumes.VolumeMaker(self.root, self._lookup, self._token, self.node_ip)
        self.stopping = threading.Event()
        self.dns_address = ""
        self.name_server: Optional[names.NameServer] = None
        self.heart: Optional[node.NodeHeart] = None

    # Start and stop --------------------------------------------------------------------------
    def start(self) -> None:
        """Creates the pods' network and name server, registers the node, starts watching."""
        network = self.podman.create_network()
        subnet = ipaddress.ip_network(network["subnet"])
        self.dns_address = network["gateway"]
        self._free = [str(ip) for ip in subnet.hosts() if str(ip) != self.dns_address]
        self.name_server = names.NameServer(self.dns_address, clients=str(subnet))
        self.podman.watch_exits(self._container_ended)
        version = self.podman.run("version", "--format", "{{.Client.Version}}").stdout.strip()
        self.heart = node.NodeHeart(self.kube, self.node_name, self.node_ip, self.kubelet_port,
                                    f"podman://{version}")
        self.heart.register()
        for target in (self._watch_services, self._watch_pods):
            threading.Thread(target=self._forever, args=(target,), name=target.__name__,
                             daemon=True).start()

    def stop(self) -> None:
        """Stops watching and heart-beating (the pods' containers stay: `bed.stop` removes them)."""
        self.stopping.set()
        if self.heart:
            self.heart.stop()
        self.podman.close()
        if self.name_server:
            self.name_server.close()

    def _forever(self, watch) -> None:
        while not self.stopping.is_set():
            try:
                watch()
            except Exception as error:  # the API server restarting, a dropped stream
                if not self.stopping.is_set():
                    log.warning("%s: %s; watching again", watch.__name__, error)
                    time.sleep(1)

    # Watches ---------------------------------------------------------------------------------
    def _watch_collection(self, path: str, handle, relisted=None) -> None:
        listed = self.kube.get(path)
        for item in listed["items"]:
            handle("ADDED", item)
        if relisted:
            relisted(listed["items"])
        version = listed["metadata"]["resourceVersion"]
        while not self.stopping.is_set():
            for event in self.kube.watch(path, version):
                if event["type"] == "ERROR":
                    return  # 410 Gone and the like: list again
                version = event["object"]["metadata"]["resourceVersion"]
                if event["type"] != "BOOKMARK":
                    handle(event["type"], event["object"])

    def _watch_services(self) -> None:
        def handle(kind: str, service: Dict[str, Any]) -> None:
            key = f"{service['metadata']['namespace']}/{service['metadata']['name']}"
            with self._lock:
                if kind == "DELETED":
                    self.services.pop(key, None)
                else:
                    self.services[key] = service
            self.names_changed()

        self._watch_collection("/api/v1/services", handle)

    def _watch_pods(self) -> None:
        self._watch_collection("/api/v1/pods", self._pod_event, self._forget_unlisted)

    def _forget_unlisted(self, pods) -> None:
        """After a re-list: the pods deleted while the watch was down are gone."""
        listed = {p["metadata"]["uid"] for p in pods}
        with self._lock:
            missing = [w for uid, w in self.workers.items() if uid not in listed]
        for worker in missing:
            worker.removed()

    def _pod_event(self, kind: str, pod: Dict[str, Any]) -> None:
        uid, spec = pod["metadata"]["uid"], pod["spec"]
        with self._lock:
            worker = self.workers.get(uid)
        if kind == "DELETED":
            if worker:
                worker.removed()
            return
        if worker:
            worker.update(pod)
            return
        if not spec.get("nodeName"):
            if not spec.get("schedulingGates") and not pod["metadata"].get("deletionTimestamp"):
                self._schedule(pod)
            return
        if spec["nodeName"] != self.node_name:
            return
        if pod["metadata"].get("deletionTimestamp"):
            self._delete_now(pod)  # never ran here (the agent restarted): nothing to stop
            return
        if (pod.get("status") or {}).get("phase") in TERMINAL:
            return
        worker = PodWorker(self, pod)
        with self._lock:
            self.workers[uid] = worker
        worker.start()

    def _delete_now(self, pod: Dict[str, Any]) -> None:
        meta = pod["metadata"]
        try:
            self.kube.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                             {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}})
        except ApiError:
            pass

    # Scheduling ------------------------------------------------------------------------------
    def _unfit(self, pod: Dict[str, Any]) -> Optional[str]:
        """Why the node cannot take the pod (the scheduler's message), or None."""
        labels = node.node_object(self.node_name, self.node_ip)["metadata"]["labels"]
        selector = pod["spec"].get("nodeSelector") or {}
        if any(labels.get(k) != v for k, v in selector.items()):
            return ("0/1 nodes are available: 1 node(s) didn't match Pod's node "
                    "affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is "
                    "not helpful for scheduling.")
        for container in pod["spec"]["containers"] + (pod["spec"].get("initContainers") or []):
            for section in ("requests", "limits"):
                for resource in ((container.get("resources") or {}).get(section) or {}):
                    if not resource.startswith(STANDARD_RESOURCES):
                        return (f"0/1 nodes are available: 1 Insufficient {resource}. "
                                "preemption: 0/1 nodes are available: 1 No preemption victims "
                                "found for incoming pod.")
        return None

    def _schedule(self, pod: Dict[str, Any]) -> None:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        reason = self._unfit(pod)
        if reason:
            if self._unschedulable.get(meta["uid"]) != reason:
                self._unschedulable[meta["uid"]] = reason
                try:
                    self.kube.merge_patch(path + "/status", {"status": {"conditions": [{
                        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": reason, "lastProbeTime": None,
                        "lastTransitionTime": now()}]}})
                except ApiError:
                    pass
            return
        try:
            self.kube.create(path + "/binding", {
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_name}})
        except ApiError as error:
            if error.status not in (404, 409):
                log.warning("binding pod %s: %s", meta["name"], error)

    # Services of the workers -----------------------------------------------------------------
    def allocate_ip(self, uid: str) -> str:
        with self._lock:
            if uid not in self._addresses:
                self._addresses[uid] = self._free.pop(0)
            return self._addresses[uid]

    def release_ip(self, uid: str) -> None:
        with self._lock:
            ip = self._addresses.pop(uid, None)
            if ip:
                self._free.append(ip)

    def forget(self, uid: str) -> None:
        with self._lock:
            self.workers.pop(uid, None)
        self.names_changed()

    def names_changed(self) -> None:
        with self._lock:
            pods = [w.pod for w in self.workers.values()]
            table = names.name_table(pods, list(self.services.values()), dict(self._addresses),
                                     self.host_services, self.dns_address)
        self.name_server.table = table

    def node_env(self) -> Dict[str, str]:
        """Variables every container started from now on gets before its pod's own (`NODE_ENV`
        in the bed's directory, if there): what a cluster's nodes give every pod, such as
        the way to its object store (a cloud's metadata server; here a GCS emulator)."""
        path = self.root / NODE_ENV
        return json.loads(path.read_text()) if path.exists() else {}

    def search_domains(self, namespace: str):
        return names.search_domains(namespace)

    def find_container(self, namespace: str, pod: str, container: str, previous: bool):
        with self._lock:
            workers = list(self.workers.values())
        for worker in workers:
            if worker.namespace == namespace and worker.pod_name == pod:
                return worker.log_target(container, previous)
        return None

    def _container_ended(self, podman_name: str) -> None:
        with self._lock:
            workers = list(self.workers.values())
        for worker in workers:
            if worker.owns(podman_name):
                worker.exited(podman_name)

    def lookup_in(self, namespace: str):
        return lambda kind, name: self._lookup(kind, namespace, name)

    def _lookup(self, kind: str, namespace: str, name: str):
        plural = "secrets" if kind == "secret" else "configmaps"
        try:
            found = self.kube.get(f"/api/v1/namespaces/{namespace}/{plural}/{name}")
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        if kind == "secret":
            return volumes.decode_secret(found.get("data"))
        return dict(found.get("data") or {})

    def _token(self, namespace: str, account: str, audience, seconds: int, pod) -> str:
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"audiences": [audience] if audience else None,
                            "expirationSeconds": max(600, int(seconds)),
                            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                               "name": pod["metadata"]["name"],
                                               "uid": pod["metadata"]["uid"]}}}
        answer = self.kube.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", request)
        return answer["status"]["token"]
