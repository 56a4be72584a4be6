"""The test operators themselves, with tiny replica programs instead of training.

They must do what the Training Operator v1.9 and the MPI Operator v0.8 do
(`kube_server.operator_rules`): TF_CONFIG, success and clean-up policies, and
what happens to a replica that exits non-zero under each restart policy.
"""

from __future__ import annotations

import json
from typing import List

import pytest

from kfdist.components.train_distributed.kubernetes.build.job_kinds import TFJOB_V1
from kfdist.components.train_distributed.kubernetes.lifecycle import job_status
from fakes.kube_server.cluster_fixtures import NAMESPACE, PODS, TFJOBS, Cluster, wait_for
from fakes.kube_server.store import NotFound
from fakes.process_state import is_running

pytestmark = pytest.mark.slow


def _tfjob(name: str, replicas: dict, code: str, **spec) -> dict:
    container = {"name": "tensorflow", "image": "ghcr.io/kfdist/kfdist-runtime:0.1.0",
                 "command": ["python", "-c", code], "env": [{"name": "FROM_SPEC", "value": "yes"}]}
    return {"apiVersion": TFJOB_V1.api_version, "kind": "TFJob",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"runPolicy": {"cleanPodPolicy": "Running"}, **spec, "tfReplicaSpecs": {
                rtype: {"replicas": n, "restartPolicy": "Never",
                        "template": {"spec": {"containers": [container]}}}
                for rtype, n in replicas.items()}}}


def _submit(cluster: Cluster, body: dict) -> tuple:
    key = TFJOBS + (NAMESPACE, body["metadata"]["name"])
    cluster.server.store.create(key, body)
    return key


def _terminal(cluster: Cluster, key) -> str:
    def condition():
        found = job_status.terminal_condition(cluster.server.store.get(key))
        return found and found.type
    return wait_for(condition)


def _pod_log(cluster: Cluster, pod_name: str) -> List[str]:
    """The pod's log so far; empty while the operator has not created the pod yet."""
    try:
        pod = cluster.server.store.get(PODS + (NAMESPACE, pod_name))
    except NotFound:
        return []
    return cluster.server.store.read_log(pod["metadata"]["uid"], 0, 0)[0]


PRINT_ENV = "import os; print(os.environ.get('TF_CONFIG', 'none')); print(os.environ['FROM_SPEC'])"
#: Prints, then lingers so every replica has printed before the chief ends the job; the chief
#: lingers longest, so the others have finished (Succeeded) by then even on a loaded machine.
PRINT_ENV_AND_LINGER = (PRINT_ENV + "; import json, time; "
                        "time.sleep(5 if json.loads(os.environ['TF_CONFIG'])['task']['type'] "
                        "== 'chief' else 1)")


def test_operator_injects_tf_config_in_the_operators_layout(cluster):
    # cleanPodPolicy None keeps every pod (and its log) after the chief ends the job; with
    # Running, a replica still running then is deleted, as the real operator does.
    key = _submit(cluster, _tfjob("layout", {"Chief": 1, "Worker": 2, "Evaluator": 1},
                                  PRINT_ENV_AND_LINGER, runPolicy={"cleanPodPolicy": "None"}))
    assert _terminal(cluster, key) == "Succeeded"
    configs = {}
    for pod in ("layout-chief-0", "layout-worker-0", "layout-worker-1", "layout-evaluator-0"):
        tf_config_line, from_spec = _pod_log(cluster, pod)
        configs[pod] = json.loads(tf_config_line)
        assert from_spec == "yes"
    cluster_spec = configs["layout-chief-0"]["cluster"]
    # Every replica type is in the cluster, the evaluator too (Training Operator v1 genClusterSpec).
    assert list(cluster_spec) == ["chief", "evaluator", "worker"]
    addresses = cluster_spec["chief"] + cluster_spec["evaluator"] + cluster_spec["worker"]
    assert len(addresses) == 4 == len(set(addresses))
    assert all(a.startswith("localhost:") for a in addresses)
    assert {pod: (c["task"]["type"], c["task"]["index"]) for pod, c in configs.items()} == {
        "layout-chief-0": ("chief", 0), "layout-worker-0": ("worker", 0),
        "layout-worker-1": ("worker", 1), "layout-evaluator-0": ("evaluator", 0)}
    assert all(c["cluster"] == cluster_spec for c in configs.values())
    pod = cluster.server.store.get(PODS + (NAMESPACE, "layout-worker-1"))
    assert pod["status"]["phase"] == "Succeeded"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_operator_gives_a_single_replica_no_tf_config(cluster):
    key = _submit(cluster, _tfjob("single", {"Worker": 1}, PRINT_ENV))
    assert _terminal(cluster, key) == "Succeeded"
    assert _pod_log(cluster, "single-worker-0") == ["none", "yes"]



def _sleeper(worker_0_seconds: float, others_seconds: float) -> str:
    """A replica program that prints `started`, then sleeps by its TF_CONFIG task index."""
    return ("import json, os, time; task = json.loads(os.environ['TF_CONFIG'])['task']; "
            "print('started', flush=True); "
            f"time.sleep({worker_0_seconds} if task['index'] == 0 else {others_seconds})")


@pytest.mark.parametrize("success_policy, pods_left", [
    (None, ["policy-worker-0"]),  # worker 0 decides; running worker 1 is killed, its pod deleted
    ("AllWorkers", ["policy-worker-0", "policy-worker-1"]),  # the job waits for worker 1
])
def test_operator_success_policy_and_clean_pod_policy(cluster, success_policy, pods_left):
    spec = {"successPolicy": success_policy} if success_policy else {}
    body = _tfjob("policy", {"Worker": 2}, _sleeper(0, 2), **spec)
    key = _submit(cluster, body)
    assert _terminal(cluster, key) == "Succeeded"
    assert [p["metadata"]["name"] for p in cluster.server.store.items(PODS, NAMESPACE)] == pods_left
    assert cluster.wait_no_processes() == []


def test_operator_kills_the_replicas_of_a_deleted_job(cluster):
    key = _submit(cluster, _tfjob("doomed", {"Worker": 2}, _sleeper(60, 60)))
    wait_for(lambda: _pod_log(cluster, "doomed-worker-1") == ["started"])
    pids = cluster.operator.running_pids()
    assert len(pids) == 2
    cluster.server.store.delete(key)
    assert cluster.wait_no_processes(10) == []
    assert not [pid for pid in pids if is_running(pid)]
    assert cluster.server.store.items(PODS, NAMESPACE) == []


def test_operator_fails_the_job_when_a_replica_fails(cluster):
    # Worker 1 fails at once; worker 0, whose success would end the job, finishes later.
    code = ("import json, os, sys, time; "
            "index = json.loads(os.environ['TF_CONFIG'])['task']['index']; "
            "time.sleep(0 if index else 5); sys.exit(3 if index else 0)")
    key = _submit(cluster, _tfjob("broken", {"Worker": 2}, code))
    assert _terminal(cluster, key) == "Failed"
    [condition] = [c for c in cluster.server.store.get(key)["status"]["conditions"]
                   if c["type"] == "Failed"]
    assert condition["reason"] == "TFJobFailed"
    assert condition["message"] == (f"TFJob {NAMESPACE}/broken has failed because 1 Worker "
                                    "replica(s) failed.")
    pod = cluster.server.store.get(PODS + (NAMESPACE, "broken-worker-1"))
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3




# Restart policies, as the operators apply them --------------------------------------------

#: Exits with the code in the file `exit-codes` (one per run, the last one repeats), after
#: printing its run number; the file lives in the replica's working directory.
RUNS = ("import os, sys; path = os.path.join(os.environ['CODES_DIR'], 'runs');"
        "n = int(open(path).read()) if os.path.exists(path) else 0;"
        "open(path, 'w').write(str(n + 1)); print('run', n, flush=True);"
        "codes = [int(c) for c in os.environ['EXIT_CODES'].split(',')];"
        "sys.exit(codes[min(n, len(codes) - 1)])")


def _runs_job(name: str, policy: str, codes: str, tmp_path, **run_policy) -> dict:
    body = _tfjob(name, {"Worker": 1}, RUNS, runPolicy={"cleanPodPolicy": "None", **run_policy})
    [worker] = body["spec"]["tfReplicaSpecs"].values()
    worker["restartPolicy"] = policy
    worker["template"]["spec"]["containers"][0]["env"] += [
        {"name": "EXIT_CODES", "value": codes}, {"name": "CODES_DIR", "value": str(tmp_path)}]
    return body


def _conditions(cluster: Cluster, key) -> List[tuple]:
    return [(c["type"], c["reason"]) for c in cluster.server.store.get(key)["status"]["conditions"]]


def test_exit_code_policy_recreates_the_pod_on_a_retryable_exit(cluster, tmp_path):
    key = _submit(cluster, _runs_job("retry", "ExitCode", "137,138,0", tmp_path))
    assert _terminal(cluster, key) == "Succeeded"
    assert (tmp_path / "runs").read_text() == "3"  # SIGKILL's 137 and 138 were retried
    assert len(cluster.operator.replica_pids("retry", "worker-0")) == 3
    pod = cluster.server.store.get(PODS + (NAMESPACE, "retry-worker-0"))
    assert pod["spec"]["restartPolicy"] == "Never"  # ExitCode runs the pod with Never
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0  # a new pod, not a restart
    assert _conditions(cluster, key)[-1] == ("Succeeded", "TFJobSucceeded")


def test_exit_code_policy_fails_the_job_on_a_permanent_exit(cluster, tmp_path):
    key = _submit(cluster, _runs_job("permanent", "ExitCode", "137,2", tmp_path))
    assert _terminal(cluster, key) == "Failed"
    [failed] = [c for c in cluster.server.store.get(key)["status"]["conditions"]
                if c["type"] == "Failed"]
    assert (failed["reason"], failed["message"]) == (
        "TFJobFailed", 'job "permanent" is failing because "Worker" replica(s) failed.')
    assert (tmp_path / "runs").read_text() == "2"


def test_on_failure_restarts_in_place_until_the_backoff_limit(cluster, tmp_path):
    key = _submit(cluster, _runs_job("flaky", "OnFailure", "1", tmp_path, backoffLimit=2))
    assert _terminal(cluster, key) == "Failed"
    [failed] = [c for c in cluster.server.store.get(key)["status"]["conditions"]
                if c["type"] == "Failed"]
    assert failed["message"] == ("Job flaky has failed because it has reached the specified "
                                 "backoff limit")
    # The first run and one restart; the second restart reaches the limit: the job fails.
    assert (tmp_path / "runs").read_text() == "2"
    # Past the backoff limit the operator deletes every pod, whatever cleanPodPolicy says.
    with pytest.raises(NotFound):
        cluster.server.store.get(PODS + (NAMESPACE, "flaky-worker-0"))


def test_active_deadline_fails_the_job_and_deletes_its_pods(cluster):
    key = _submit(cluster, _tfjob("slow", {"Worker": 2}, _sleeper(60, 60),
                                  runPolicy={"cleanPodPolicy": "None",
                                             "activeDeadlineSeconds": 1}))
    assert _terminal(cluster, key) == "Failed"
    [failed] = [c for c in cluster.server.store.get(key)["status"]["conditions"]
                if c["type"] == "Failed"]
    assert failed["message"] == ("Job slow has failed because it was active longer than "
                                 "specified deadline")
    assert cluster.server.store.items(PODS, NAMESPACE) == []
    assert cluster.wait_no_processes() == []
