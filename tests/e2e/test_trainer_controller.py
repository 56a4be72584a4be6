"""The test Kubeflow Trainer, JobSet and Job controllers themselves, with tiny programs for replicas.

They must do what Trainer v2.3, JobSet v0.12 and the batch/v1 Job controller
do with kfdist's runtimes (`kube_server.trainer_rules`): JobSet, Job and pod
names, labels and DNS identity; the runtime's success policy (pod 0 decides)
and pod failure policy (exit codes 1-127 fail the job, others re-create the
pod up to the backoff limit); the launcher's in-place restarts and its wait
for Ready nodes; suspension; the deadline; the webhook's refusal of a
TrainJob whose runtime is missing.
"""

from __future__ import annotations

import json
import re
import time
from typing import List

import kubernetes
import pytest

from kfdist.components.train_distributed.kubernetes.lifecycle import job_status
from fakes.kube_server.cluster_fixtures import NAMESPACE, Cluster, wait_for
from fakes.kube_server.store import NotFound
from fakes.kube_server.trainer_objects import JOBS, JOBSETS, PODS, TRAINJOBS

pytestmark = pytest.mark.slow

#: Counts its runs per index, prints its identity, exits with the index's next code
#: (EXIT_CODES_<index>, comma-separated, the last repeating; default 0) after SLEEP_<index> s.
RUNS = ("import os, sys, time; i = os.environ['JOB_COMPLETION_INDEX'];"
        "path = os.path.join(os.environ['CODES_DIR'], 'runs-' + i);"
        "n = int(open(path).read()) if os.path.exists(path) else 0;"
        "open(path, 'w').write(str(n + 1));"
        "print('identity', *[os.environ.get(v, '-') for v in ('KFDIST_JOBSET_NAME',"
        " 'KFDIST_REPLICATED_JOB', 'KFDIST_JOB_INDEX', 'JOB_COMPLETION_INDEX', 'KFDIST_NAMESPACE')],"
        " os.environ.get('OMPI_MCA_orte_default_hostfile', '-'), flush=True);"
        "time.sleep(float(os.environ.get('SLEEP_' + i, '0')));"
        "codes = [int(c) for c in os.environ.get('EXIT_CODES_' + i, '0').split(',')];"
        "sys.exit(codes[min(n, len(codes) - 1)])")


def _trainjob(name: str, nodes: int, tmp_path, runtime: str = "kfdist-tensorflow",
              command=None, **env) -> dict:
    variables = [{"name": "CODES_DIR", "value": str(tmp_path)}] + [
        {"name": k, "value": str(v)} for k, v in env.items()]
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"runtimeRef": {"name": runtime},
                     "trainer": {"command": command or ["python", "-c", RUNS], "numNodes": nodes,
                                 "env": variables}}}


def _submit(cluster: Cluster, body: dict) -> tuple:
    key = TRAINJOBS + (NAMESPACE, body["metadata"]["name"])
    cluster.server.store.create(key, body)
    return key


def _terminal(cluster: Cluster, key) -> job_status.JobCondition:
    return wait_for(lambda: job_status.terminal_condition(cluster.server.store.get(key)))


def _pods(cluster: Cluster, name: str) -> List[dict]:
    return [p for p in cluster.server.store.items(PODS, NAMESPACE)
            if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == name]


def _runs(tmp_path, index: int) -> int:
    path = tmp_path / f"runs-{index}"
    return int(path.read_text()) if path.exists() else 0


def test_a_trainjob_becomes_a_jobset_whose_pods_have_jobset_identities(cluster, tmp_path):
    key = _submit(cluster, _trainjob("ident", 3, tmp_path, SLEEP_0=1))
    condition = _terminal(cluster, key)
    assert (condition.type, condition.reason, condition.message) == (
        "Complete", "AllJobsCompleted", "jobset completed successfully")
    trainjob = cluster.server.store.get(key)
    jobset = cluster.server.store.get(JOBSETS + (NAMESPACE, "ident"))
    assert jobset["metadata"]["ownerReferences"][0]["uid"] == trainjob["metadata"]["uid"]
    job = cluster.server.store.get(JOBS + (NAMESPACE, "ident-node-0"))
    assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (3, 3)
    pods = sorted(_pods(cluster, "ident"), key=lambda p: p["metadata"]["labels"][
        "batch.kubernetes.io/job-completion-index"])
    assert len(pods) == 3
    for index, pod in enumerate(pods):
        assert re.fullmatch(rf"ident-node-0-{index}-[a-z0-9]{{5}}", pod["metadata"]["name"])
        assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (f"ident-node-0-{index}", "ident")
        assert pod["spec"]["restartPolicy"] == "Never"
        log = cluster.server.store.read_log(pod["metadata"]["uid"], 0, 0)[0]
        assert f"identity ident node 0 {index} {NAMESPACE} -" in log
    assert {(j["name"], j["succeeded"]) for j in trainjob["status"]["jobsStatus"]} == {("node", 1)}
    assert cluster.wait_no_processes() == []


def test_pod_0_decides_success_and_the_other_pods_are_ended(cluster, tmp_path):
    key = _submit(cluster, _trainjob("chief", 3, tmp_path, SLEEP_0=1, SLEEP_1=600, SLEEP_2=600))
    assert _terminal(cluster, key).type == "Complete"
    assert [p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
            for p in _pods(cluster, "chief")] == ["0"]
    assert cluster.wait_no_processes() == []


def test_a_permanent_exit_fails_the_trainjob_through_the_pod_failure_policy(cluster, tmp_path):
    key = _submit(cluster, _trainjob("bug", 2, tmp_path, SLEEP_0=600, EXIT_CODES_1=1))
    condition = _terminal(cluster, key)
    assert (condition.type, condition.reason, condition.message) == (
        "Failed", "FailedJobs",
        "jobset failed due to one or more job failures (first failed job: bug-node-0)")
    job = cluster.server.store.get(JOBS + (NAMESPACE, "bug-node-0"))
    [failed] = job["status"]["conditions"]
    assert failed["reason"] == "PodFailurePolicy"
    assert re.fullmatch(r"Container node for pod kubeflow-test/bug-node-0-1-[a-z0-9]{5} failed "
                        r"with exit code 1 matching FailJob rule at index 1", failed["message"])
    assert _runs(tmp_path, 1) == 1
    assert cluster.wait_no_processes() == []


def test_a_killed_pod_is_replaced_with_a_new_name_and_the_same_hostname(cluster, tmp_path):
    key = _submit(cluster, _trainjob("kill", 2, tmp_path, SLEEP_0=3, EXIT_CODES_1="137,138,0"))
    assert _terminal(cluster, key).type == "Complete"
    assert _runs(tmp_path, 1) == 3
    assert len(cluster.operator.replica_pids("kill", "node-1")) == 3
    assert cluster.wait_no_processes() == []


def test_retryable_exits_past_the_backoff_limit_fail_the_job(cluster, tmp_path):
    key = _submit(cluster, _trainjob("flaky", 1, tmp_path, EXIT_CODES_0=138))
    condition = _terminal(cluster, key)
    assert condition.reason == "FailedJobs"
    job = cluster.server.store.get(JOBS + (NAMESPACE, "flaky-node-0"))
    assert job["status"]["conditions"][0]["reason"] == "BackoffLimitExceeded"
    assert _runs(tmp_path, 0) == 7  # the first run and the runtime's backoffLimit of 6 retries


def test_the_horovod_launcher_waits_for_ready_nodes_and_restarts_in_place(cluster, tmp_path):
    key = _submit(cluster, _trainjob("hvd", 3, tmp_path, runtime="kfdist-horovod",
                                     EXIT_CODES_0="1,0"))
    assert _terminal(cluster, key).type == "Complete"
    launcher = [p for p in cluster.server.store.items(PODS, NAMESPACE)
                if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "launcher"]
    assert [p["status"]["containerStatuses"][0]["restartCount"] for p in launcher] == [1]
    assert _runs(tmp_path, 0) == 2
    [pod] = launcher
    lines = cluster.server.store.read_log(pod["metadata"]["uid"], 0, 0)[0]
    assert any(line.startswith("identity - - - 0 - /") and line.endswith("/hostfile")
               for line in lines), lines
    events = cluster.server.store.events_after(PODS, NAMESPACE, 0, 0)
    role = lambda e: e.object["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]  # noqa: E731
    first_running = {}
    for e in events:
        if role(e) == "node" and e.object["status"]["phase"] == "Running":
            first_running.setdefault(e.object["metadata"]["name"], e.resource_version)
    node_ready = max(first_running.values())
    launcher_created = min(e.resource_version for e in events
                           if role(e) == "launcher" and e.type == "ADDED")
    assert node_ready < launcher_created  # dependsOn: node Ready
    nodes = cluster.server.store.get(JOBSETS + (NAMESPACE, "hvd"))["spec"]["replicatedJobs"][0]
    assert nodes["template"]["spec"]["parallelism"] == 2  # numNodes 3: the launcher is a node
    assert cluster.wait_no_processes() == []


def test_a_suspended_trainjob_starts_when_resumed(cluster, tmp_path):
    body = _trainjob("queued", 1, tmp_path)
    body["spec"]["suspend"] = True
    key = _submit(cluster, body)
    wait_for(lambda: cluster.server.store.get(key).get("status", {}).get("conditions"))
    time.sleep(0.5)
    assert [(c["type"], c["status"], c["reason"]) for c in
            cluster.server.store.get(key)["status"]["conditions"]] == [("Suspended", "True", "Suspended")]
    assert _pods(cluster, "queued") == []
    cluster.server.store.update(key, lambda o: o["spec"].update(suspend=False))
    assert _terminal(cluster, key).type == "Complete"
    conditions = {c["type"]: (c["status"], c["reason"], c["message"])
                  for c in cluster.server.store.get(key)["status"]["conditions"]}
    assert conditions["Suspended"] == ("False", "Resumed", "TrainJob is resumed")


def test_the_deadline_fails_the_trainjob_and_deletes_its_jobset(cluster, tmp_path):
    body = _trainjob("slow", 2, tmp_path, SLEEP_0=600, SLEEP_1=600)
    body["spec"]["activeDeadlineSeconds"] = 1
    key = _submit(cluster, body)
    condition = _terminal(cluster, key)
    assert (condition.reason, condition.message) == (
        "DeadlineExceeded", "TrainJob exceeded its active deadline")
    with pytest.raises(NotFound):
        cluster.server.store.get(JOBSETS + (NAMESPACE, "slow"))
    assert _pods(cluster, "slow") == []
    assert cluster.wait_no_processes() == []


def test_a_trainjob_on_a_missing_runtime_is_refused_by_the_webhook(cluster, tmp_path):
    custom = kubernetes.client.CustomObjectsApi(cluster.server.api_client())
    with pytest.raises(kubernetes.client.ApiException) as refused:
        custom.create_namespaced_custom_object(*TRAINJOBS[:2], NAMESPACE, TRAINJOBS[2],
                                               _trainjob("orphan", 1, tmp_path, runtime="nope"))
    assert refused.value.status == 403
    message = json.loads(refused.value.body)["message"]
    assert message.startswith('admission webhook "validator.trainjob.trainer.kubeflow.org" denied '
                              'the request: spec.RuntimeRef: Invalid value:')
    assert message.endswith('clustertrainingruntimes.trainer.kubeflow.org "nope" not found: '
                            "specified clusterTrainingRuntime must be created before the TrainJob "
                            "is created")
    assert cluster.server.store.items(TRAINJOBS, NAMESPACE) == []
