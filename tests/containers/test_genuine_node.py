"""The genuine node under the bed (`up.sh DIR --stack node`): a real kubelet on containerd and
runc, kube-scheduler binding, kube-proxy's ClusterIP Services, CoreDNS and a dynamic volume
provisioner, as a cluster gives them, with kfdist's runtime image as a pod's.

What the node agent played differently is what these tests pin down: a pod reaches the API
server at the `kubernetes` Service with its ServiceAccount token (kfdist's in-cluster
configuration); `<host>.<subdomain>` resolves only once the headless Service exists; a pod whose
claim does not exist, or that no node can take, stays Pending.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from cluster import node_addons, node_config
from cluster.fixture import RUNNER, wait_for

#: What the probe pod runs: kfdist's own client, configured in the cluster (`KubeApi`).
IN_CLUSTER = textwrap.dedent("""
    import json, os, socket
    from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi
    api = KubeApi.from_environment()
    namespace = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
    pods, _ = api.list_pods(namespace, "")
    print(json.dumps({
        "kubernetes": socket.gethostbyname("kubernetes.default.svc.cluster.local"),
        "service_host": os.environ.get("KUBERNETES_SERVICE_HOST"),
        "pods": sorted(p["metadata"]["name"] for p in pods)}))
""")


def _pod(name: str, image: str, command, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"restartPolicy": "Never", "serviceAccountName": RUNNER,
                     "containers": [{"name": "main", "image": image,
                                     "imagePullPolicy": "Never", "command": command}],
                     **spec}}


def _scheduling_verdict(namespace, name: str) -> dict:
    """The pod's PodScheduled condition, once the scheduler has set it."""
    return wait_for(lambda: next((c for c in namespace.get("pod", name)["status"].get(
        "conditions", []) if c["type"] == "PodScheduled"), None), 60, "the scheduler's verdict")


def _phase(namespace, name: str) -> str:
    return namespace.get("pod", name)["status"].get("phase", "")


def test_the_node_is_a_kubelet_on_containerd_with_dns_and_a_provisioner_in_kube_system(node_bed):
    nodes = json.loads(node_bed.kubectl_run("get", "nodes", "-o", "json").stdout)["items"]
    assert [n["metadata"]["name"] for n in nodes] == [node_config.NODE_NAME]
    info = nodes[0]["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.36.3"
    assert info["containerRuntimeVersion"].startswith("containerd://2."), info
    wide = node_bed.kubectl_run("get", "nodes", "-o", "wide").stdout
    assert "v1.36.3" in wide and "containerd://2." in wide, wide
    for namespace, app in (("kube-system", "k8s-app=kube-dns"),
                           (node_addons.PROVISIONER_NAMESPACE, "app=local-path-provisioner")):
        pods = json.loads(node_bed.kubectl_run("get", "pods", "-n", namespace, "-l", app,
                                               "-o", "json").stdout)["items"]
        assert [p["status"]["phase"] for p in pods] == ["Running"], (namespace, pods)
        assert pods[0]["spec"]["nodeName"] == node_config.NODE_NAME


def test_a_pod_reaches_the_api_server_in_cluster_with_its_token(node_bed, node_namespace,
                                                                 kfdist_images):
    pod = _pod("probe", kfdist_images["runtime"], ["python", "-c", IN_CLUSTER])
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    wait_for(lambda: _phase(node_namespace, "probe") in ("Succeeded", "Failed"), 180,
             "the probe pod's end")
    log = node_namespace.kubectl("logs", "probe").stdout
    assert _phase(node_namespace, "probe") == "Succeeded", log
    seen = json.loads(log.strip().splitlines()[-1])
    assert seen == {"kubernetes": node_config.KUBERNETES_SERVICE_IP,
                    "service_host": node_config.KUBERNETES_SERVICE_IP, "pods": ["probe"]}


def test_a_host_in_a_subdomain_resolves_only_once_its_headless_service_exists(
        node_bed, node_namespace, kfdist_images):
    image = kfdist_images["runtime"]
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps(_pod(
        "worker", image, ["sleep", "600"], hostname="worker-0", subdomain="workers")))
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps(_pod(
        "client", image, ["sleep", "600"])))
    for name in ("worker", "client"):
        wait_for(lambda: _phase(node_namespace, name) == "Running", 180, f"{name} running")
    fqdn = f"worker-0.workers.{node_namespace.name}.svc.cluster.local"

    def resolved():
        """What `getent hosts` answers in the client pod, or None when the name is unknown."""
        found = node_namespace.kubectl("exec", "client", "--", "getent", "hosts", fqdn,
                                       check=False)
        return found.stdout if found.returncode == 0 else None

    assert resolved() is None, "resolved before the headless Service exists"
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "workers"},
        "spec": {"clusterIP": "None", "selector": {"app": "worker"},
                 "ports": [{"port": 2222}]}}))
    answer = wait_for(resolved, 60, f"{fqdn} resolving")
    worker_ip = node_namespace.get("pod", "worker")["status"]["podIP"]
    assert answer.split()[0] == worker_ip


def test_a_claim_is_provisioned_as_a_host_directory_and_a_missing_one_keeps_the_pod_pending(
        node_bed, node_namespace, kfdist_images):
    image = kfdist_images["runtime"]
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "work"},
        "spec": {"accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}}))
    volume = {"name": "work", "persistentVolumeClaim": {"claimName": "work"}}
    writer = _pod("writer", image, ["sh", "-c", "echo written > /work/file"], volumes=[volume])
    writer["spec"]["containers"][0]["volumeMounts"] = [{"name": "work", "mountPath": "/work"}]
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps(writer))
    wait_for(lambda: _phase(node_namespace, "writer") in ("Succeeded", "Failed"), 180,
             "the writer's end")
    assert _phase(node_namespace, "writer") == "Succeeded"
    claim = node_namespace.get("persistentvolumeclaim", "work")
    assert claim["status"]["phase"] == "Bound"
    assert claim["spec"]["storageClassName"] == node_addons.STORAGE_CLASS
    on_host = node_bed.root / "volumes" / node_namespace.name / "work" / "file"
    assert on_host.read_text() == "written\n"

    orphan = _pod("orphan", image, ["true"], volumes=[
        {"name": "work", "persistentVolumeClaim": {"claimName": "no-such-claim"}}])
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps(orphan))
    condition = _scheduling_verdict(node_namespace, "orphan")
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    assert "no-such-claim" in condition["message"]
    assert _phase(node_namespace, "orphan") == "Pending"


def test_a_pod_no_node_can_take_stays_pending_with_the_schedulers_reason(
        node_bed, node_namespace, kfdist_images):
    pod = _pod("picky", kfdist_images["runtime"], ["true"], nodeSelector={"disk": "ssd"})
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    condition = _scheduling_verdict(node_namespace, "picky")
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    assert "node affinity/selector" in condition["message"]
    assert "nodeName" not in node_namespace.get("pod", "picky")["spec"]
