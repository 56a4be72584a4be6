"""The test bed itself, through kubectl as a person would use it: the real API server and
controller manager, the operators' own controllers, and the node agent's kubelet behaviour
(scheduling, downward API, DNS, logs through `pods/log`, exit codes and restarts, image pull
errors, graceful deletion, garbage collection)."""

from __future__ import annotations

import json

import pytest

from cluster.fixture import wait_for
from cluster.node_agent.__main__ import NODE_NAME

pytestmark = pytest.mark.slow
#: The bed's smallest image (containers/build.sh makes it as the runtime image's base).
BASE_IMAGE = "docker.io/library/debian:12.15-slim"


def _pod(name: str, command: str, restart: str = "Never", image: str = BASE_IMAGE, **spec) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "labels": {"app": name}}, "spec": {
        "restartPolicy": restart, "terminationGracePeriodSeconds": 5, **spec,
        "containers": [{"name": "main", "image": image, "command": ["sh", "-c", command],
                        "env": [{"name": "MY_NAME", "valueFrom": {"fieldRef": {
                            "fieldPath": "metadata.name"}}},
                                {"name": "MY_IP", "valueFrom": {"fieldRef": {
                                    "fieldPath": "status.podIP"}}},
                                {"name": "GREETING", "value": "hi $(MY_NAME)"}]}]}})


def _phase(ns, name: str) -> str:
    return ns.get("pod", name).get("status", {}).get("phase", "")


def test_the_node_is_ready_and_every_operator_kind_is_served(kube_bed):
    nodes = json.loads(kube_bed.kubectl_run("get", "nodes", "-o", "json").stdout)["items"]
    assert [n["metadata"]["name"] for n in nodes] == [NODE_NAME]
    ready = [c for c in nodes[0]["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"
    version = json.loads(kube_bed.kubectl_run("version", "-o", "json").stdout)["serverVersion"]
    assert version["gitVersion"].startswith("v1.36.") and version["minor"] == "36"
    resources = kube_bed.kubectl_run("api-resources", "-o", "name").stdout.split()
    for kind in ("tfjobs.kubeflow.org", "pytorchjobs.kubeflow.org", "mpijobs.kubeflow.org",
                 "trainjobs.trainer.kubeflow.org", "clustertrainingruntimes.trainer.kubeflow.org",
                 "jobsets.jobset.x-k8s.io", "clusterqueues.kueue.x-k8s.io",
                 "localqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"):
        assert kind in resources, kind
    mpijobs = json.loads(kube_bed.kubectl_run("get", "crd", "mpijobs.kubeflow.org", "-o",
                                              "json").stdout)
    assert [v["name"] for v in mpijobs["spec"]["versions"] if v["served"]] == ["v2beta1"]


def test_a_pod_gets_its_downward_api_env_a_dns_name_and_its_logs_stream(kube_bed, bed_namespace,
                                                                       kfdist_images):
    ns = bed_namespace
    ns.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "peers"},
        "spec": {"clusterIP": "None", "selector": {"app": "talker"}}}))
    ns.kubectl("apply", "-f", "-", stdin=_pod(
        "talker", 'echo "$GREETING at $MY_IP"; getent hosts talker.peers; getent hosts peers; '
                  f'getent hosts peers.{ns.name}.svc.cluster.local; exit 3',
        hostname="talker", subdomain="peers"))
    wait_for(lambda: _phase(ns, "talker") == "Failed", seconds=60, what="the pod to fail")
    pod = ns.get("pod", "talker")
    assert pod["spec"]["nodeName"] == NODE_NAME
    address = pod["status"]["podIP"]
    logs = ns.kubectl("logs", "talker").stdout.splitlines()  # through the API server
    assert logs[0] == f"hi talker at {address}"
    assert [line.split()[0] for line in logs[1:]] == [address] * 3
    state = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (state["exitCode"], state["reason"]) == (3, "Error")
    conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conditions["PodScheduled"] == "True" and conditions["Ready"] == "False"


def test_on_failure_restarts_count_and_a_missing_image_backs_off(kube_bed, bed_namespace,
                                                                 kfdist_images):
    ns = bed_namespace
    ns.kubectl("apply", "-f", "-", stdin=_pod(
        "flaky", "n=$(ls /data | wc -l); touch /data/run-$n; echo run $n; [ $n -ge 1 ]",
        restart="OnFailure", volumes=[{"name": "data", "emptyDir": {}}]).replace(
        '"env"', '"volumeMounts": [{"name": "data", "mountPath": "/data"}], "env"'))
    ns.kubectl("apply", "-f", "-", stdin=_pod("ghost", "true", image="example.com/no/such:1"))
    wait_for(lambda: _phase(ns, "flaky") == "Succeeded", seconds=90, what="a restart")
    status = ns.get("pod", "flaky")["status"]["containerStatuses"][0]
    assert status["restartCount"] == 1
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert ns.kubectl("logs", "flaky").stdout.strip() == "run 1"
    assert ns.kubectl("logs", "flaky", "--previous").stdout.strip() == "run 0"
    waiting = wait_for(lambda: ns.get("pod", "ghost")["status"].get("containerStatuses", [{}])[0]
                       .get("state", {}).get("waiting", {}).get("reason") == "ImagePullBackOff",
                       seconds=60, what="ImagePullBackOff")
    assert waiting and _phase(ns, "ghost") == "Pending"


def test_graceful_deletion_sends_sigterm_and_owners_take_their_pods_along(kube_bed, bed_namespace,
                                                                          kfdist_images):
    ns = bed_namespace
    claim = ns.claim_path("work")
    ns.kubectl("apply", "-f", "-", stdin=_pod(
        "graceful", "trap 'echo TERM > /work/signal; exit 0' TERM; echo up; "
                    "while true; do sleep 0.2; done", restart="Always",
        volumes=[{"name": "work", "persistentVolumeClaim": {"claimName": "work"}}]).replace(
        '"env"', '"volumeMounts": [{"name": "work", "mountPath": "/work"}], "env"'))
    wait_for(lambda: _phase(ns, "graceful") == "Running", seconds=60, what="Running")
    wait_for(lambda: "up" in ns.kubectl("logs", "graceful").stdout, seconds=60, what="its first line")
    ns.kubectl("delete", "pod", "graceful", "--wait=true", "--timeout=60s")
    assert (claim / "signal").read_text().strip() == "TERM"

    owner = json.loads(ns.kubectl("create", "configmap", "owner", "-o", "json").stdout)
    owned = json.loads(_pod("owned", "sleep 300"))
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                             "name": "owner", "uid": owner["metadata"]["uid"]}]
    ns.kubectl("apply", "-f", "-", stdin=json.dumps(owned))
    wait_for(lambda: _phase(ns, "owned") == "Running", seconds=60, what="Running")
    ns.kubectl("delete", "configmap", "owner", "--wait=true")
    wait_for(lambda: ns.kubectl("get", "pod", "owned", check=False).returncode != 0,
             seconds=60, what="the garbage collector to delete the pod")
