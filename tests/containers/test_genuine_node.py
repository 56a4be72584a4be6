"""The genuine node under the bed (`up.sh DIR --stack node`): a real kubelet on containerd and
runc, kube-scheduler binding, kube-proxy's ClusterIP Services, CoreDNS and a dynamic volume
provisioner, as a cluster gives them, with kfdist's runtime image as a pod's.

What only a real node does is what these tests pin down: a pod reaches the API
server at the `kubernetes` Service with its ServiceAccount token (kfdist's in-cluster
configuration); `<host>.<subdomain>` resolves only once the headless Service exists; a pod whose
claim does not exist, or that no node can take, stays Pending. And what any kubelet does: the
downward API's variables, exit codes and restarts through `pods/log`, an image that cannot be
pulled backing off, graceful deletion, garbage collection of owned pods.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from cluster import node_addons, node_config
from cluster.fixture import wait_for
from cluster.namespaces import RUNNER

pytestmark = pytest.mark.slow

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


def _with_volume(pod: dict, volume: dict, mount_path: str) -> dict:
    pod["spec"]["volumes"] = [volume]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": volume["name"],
                                                     "mountPath": mount_path}]
    return pod


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


def test_every_operators_kind_is_served(node_bed):
    resources = node_bed.kubectl_run("api-resources", "-o", "name").stdout.split()
    for kind in ("tfjobs.kubeflow.org", "pytorchjobs.kubeflow.org", "mpijobs.kubeflow.org",
                 "trainjobs.trainer.kubeflow.org", "clustertrainingruntimes.trainer.kubeflow.org",
                 "jobsets.jobset.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
                 "localqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"):
        assert kind in resources, kind
    mpijobs = json.loads(node_bed.kubectl_run("get", "crd", "mpijobs.kubeflow.org", "-o",
                                              "json").stdout)
    assert [v["name"] for v in mpijobs["spec"]["versions"] if v["served"]] == ["v2beta1"]


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
    writer = _with_volume(_pod("writer", image, ["sh", "-c", "echo written > /work/file"]),
                          {"name": "work", "persistentVolumeClaim": {"claimName": "work"}}, "/work")
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps(writer))
    wait_for(lambda: _phase(node_namespace, "writer") in ("Succeeded", "Failed"), 180,
             "the writer's end")
    assert _phase(node_namespace, "writer") == "Succeeded"
    claim = node_namespace.get("persistentvolumeclaim", "work")
    assert claim["status"]["phase"] == "Bound"
    assert claim["spec"]["storageClassName"] == node_addons.STORAGE_CLASS
    on_host = node_namespace.claim_dir("work") / "file"
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


def test_a_pods_downward_api_env_exit_code_and_log_come_as_a_kubelet_gives_them(
        node_bed, node_namespace, kfdist_images):
    pod = _pod("talker", kfdist_images["runtime"],
               ["sh", "-c", 'echo "$GREETING at $MY_IP"; exit 3'])
    pod["spec"]["containers"][0]["env"] = [
        {"name": "MY_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "GREETING", "value": "hi $(MY_NAME)"}]
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    wait_for(lambda: _phase(node_namespace, "talker") == "Failed", 180, "the pod to fail")
    pod = node_namespace.get("pod", "talker")
    logs = node_namespace.kubectl("logs", "talker").stdout  # through the API server
    assert logs == f"hi talker at {pod['status']['podIP']}\n"
    state = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (state["exitCode"], state["reason"]) == (3, "Error")
    conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conditions["PodScheduled"] == "True" and conditions["Ready"] == "False"


def test_on_failure_restarts_count_and_a_missing_image_backs_off(node_bed, node_namespace,
                                                                 kfdist_images):
    flaky = _pod("flaky", kfdist_images["runtime"], [
        "sh", "-c", "n=$(ls /data | wc -l); touch /data/run-$n; echo run $n; [ $n -ge 1 ] || "
                    "exit 1; sleep 600"], restartPolicy="OnFailure")
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps(
        _with_volume(flaky, {"name": "data", "emptyDir": {}}, "/data")))
    ghost = _pod("ghost", "example.com/no/such:1", ["true"])
    ghost["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps(ghost))
    status = wait_for(lambda: next((s for s in node_namespace.get("pod", "flaky")["status"].get(
        "containerStatuses", []) if s["restartCount"] == 1 and "running" in s["state"]), None),
        180, "a restart")
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert node_namespace.kubectl("logs", "flaky").stdout == "run 1\n"
    assert node_namespace.kubectl("logs", "flaky", "--previous").stdout == "run 0\n"
    wait_for(lambda: node_namespace.get("pod", "ghost")["status"].get(
        "containerStatuses", [{}])[0].get("state", {}).get("waiting", {}).get(
        "reason") == "ImagePullBackOff", 120, "ImagePullBackOff")
    assert _phase(node_namespace, "ghost") == "Pending"


def test_graceful_deletion_sends_sigterm_and_owners_take_their_pods_along(
        node_bed, node_namespace, kfdist_images):
    image = kfdist_images["runtime"]
    claim = node_namespace.claim_path("work")
    graceful = _pod("graceful", image, [
        "sh", "-c", "trap 'echo TERM > /work/signal; exit 0' TERM; echo up; "
                    "while true; do sleep 0.2; done"], terminationGracePeriodSeconds=30)
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps(_with_volume(
        graceful, {"name": "work", "persistentVolumeClaim": {"claimName": "work"}}, "/work")))
    wait_for(lambda: "up" in node_namespace.kubectl("logs", "graceful", check=False).stdout, 180,
             "its first line")
    node_namespace.kubectl("delete", "pod", "graceful", "--wait=true", "--timeout=60s")
    assert (claim / "signal").read_text() == "TERM\n"

    owner = json.loads(node_namespace.kubectl("create", "configmap", "owner", "-o", "json").stdout)
    owned = _pod("owned", image, ["sleep", "300"])
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                             "name": "owner", "uid": owner["metadata"]["uid"]}]
    node_namespace.kubectl("apply", "-f", "-", stdin=json.dumps(owned))
    wait_for(lambda: _phase(node_namespace, "owned") == "Running", 180, "Running")
    node_namespace.kubectl("delete", "configmap", "owner", "--wait=true")
    wait_for(lambda: node_namespace.kubectl("get", "pod", "owned", check=False).returncode != 0,
             120, "the garbage collector to delete the pod")
