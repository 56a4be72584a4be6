"""The launcher against a stateful API server over real HTTP, driven by the real `kubernetes` client.

Nothing in the client is patched: `kube_server` speaks the apiserver's protocol
(watch streams, Status errors, 410 Gone, chunked logs) and a scripted operator
moves pods and job conditions the way the Training and MPI operators do. What
the real control plane shows (tests/containers/: logs streamed through Pending,
a failed image pull, an unschedulable pod at the timeout, SIGTERM, the reaction
time, the owner reference, an RBAC refusal naming the Role, a retry's two
owners, an earlier attempt's failed job replaced, a foreign job of the same name
left alone) is not repeated here: these are the faults and corner cases it
cannot be made to produce on demand.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from typing import List

import pytest

from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi, OwnerRef
from kfdist.components.train_distributed.kubernetes.client.kube_errors import (
    CrdNotInstalledError, NotFoundError)
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import (
    JobTimeoutError, cancel_on_sigterm, launch_and_wait, prepare_body)
from fakes.kube_server import FakeOperator, KubeServer, Scenario, sample_mpijob, sample_tfjob

TFJOBS = ("kubeflow.org", "v1", "tfjobs")
PODS = ("", "v1", "pods")


@dataclasses.dataclass
class Cluster:
    server: KubeServer
    operator: FakeOperator
    api: KubeApi
    lines: List[str]

    def launch(self, job, timeout_seconds=20.0, owner=None):
        return launch_and_wait(job, self.api, timeout_seconds=timeout_seconds, log=self.lines.append,
                               owner=owner)

    def jobs(self, resource=TFJOBS):
        return self.server.store.items(resource, "kubeflow")

    def pods(self):
        return self.server.store.items(PODS, "kubeflow")


@pytest.fixture
def cluster():
    server = KubeServer().start()
    operator = FakeOperator(server.store)
    yield Cluster(server, operator, KubeApi(server.api_client()), [])
    operator.stop()
    server.stop()


def test_failure_names_operator_message_and_oomkilled_exit_code(cluster):
    job = sample_tfjob()
    cluster.operator.script(job.name, Scenario(outcome="Failed", pod_failure="OOMKilled",
                                               failing_replica="worker-0"))
    with pytest.raises(TrainingFailedError) as raised:
        cluster.launch(job)
    message = str(raised.value)
    assert "TFJob kubeflow/run-1-train has failed because 1 Worker replica(s) failed." in message
    assert "worker-0: container tensorflow terminated: OOMKilled (exit code 137)" in message
    assert "[worker-0] container tensorflow terminated: OOMKilled (exit code 137)" in cluster.lines
    assert len(cluster.jobs()) == 1  # a failed job is kept for inspection


def test_pending_pod_without_condition_is_explained_by_its_events(cluster):
    job = sample_tfjob()
    cluster.operator.script(job.name, Scenario(outcome="Hang", pending_seconds=60))
    pod_name = f"{job.name}-worker-0"

    def add_event():
        time.sleep(0.3)
        pod = cluster.server.store.get(PODS + ("kubeflow", pod_name))
        event = {"metadata": {"name": f"{pod_name}.1"}, "type": "Warning", "reason": "FailedMount",
                 "message": 'MountVolume.SetUp failed for volume "data": pvc "train-data" not found',
                 "involvedObject": {"kind": "Pod", "name": pod_name, "uid": pod["metadata"]["uid"]}}
        cluster.server.store.create(("", "v1", "events", "kubeflow", f"{pod_name}.1"), event)
    threading.Thread(target=add_event).start()
    with pytest.raises(JobTimeoutError) as raised:
        cluster.launch(job, timeout_seconds=1.0)
    assert 'worker-0: FailedMount: MountVolume.SetUp failed for volume "data"' in str(raised.value)


def test_cancel_on_sigterm_restores_the_previous_handler():
    def previous(signum, frame):
        pass
    original = signal.signal(signal.SIGTERM, previous)
    try:
        with cancel_on_sigterm(exit_code=None):
            assert signal.getsignal(signal.SIGTERM) is not previous
        assert signal.getsignal(signal.SIGTERM) is previous
    finally:
        signal.signal(signal.SIGTERM, original)


def test_watch_gone_relists_and_still_completes(cluster):
    job = sample_tfjob()

    def compact_history():  # a dropped connection, then the history is compacted past the job
        cluster.server.faults.drop_watches()
        time.sleep(0.3)
        cluster.server.store.create(("", "v1", "events", "kubeflow", "unrelated"), {"metadata": {}})
        cluster.server.store.compact()
    cluster.operator.script(job.name, Scenario(on_running=compact_history, run_seconds=0.6))
    outcome = cluster.launch(job)
    assert outcome.reason == "TFJobSucceeded"
    assert "Watch expired (410 Gone): re-reading the job and watching afresh" in cluster.lines
    assert len(cluster.server.requests.matching(verb="get", resource="tfjobs")) == 1
    watches = cluster.server.requests.matching(verb="watch", resource="tfjobs")
    assert len(watches) == 3  # the dropped one, the one ended by 410, the fresh one
    assert "resourceVersion" not in watches[-1].query
    assert [line for line in cluster.lines if "saved model" in line] == ["[chief-0] saved model"]


def test_server_errors_are_retried_with_backoff(cluster):
    job = sample_tfjob()

    def burst():
        cluster.server.faults.fail_next(3, 500, path_contains="/tfjobs")
        cluster.server.faults.drop_watches()
    cluster.operator.script(job.name, Scenario(on_running=burst, run_seconds=0.8))
    cluster.server.faults.fail_next(3, 503, method="POST")
    outcome = cluster.launch(job)
    assert outcome.reason == "TFJobSucceeded"
    assert len(cluster.jobs()) == 1
    assert sum("Kubernetes API unavailable" in line for line in cluster.lines) >= 6


def test_log_stream_dropped_midway_resumes_without_duplicates(cluster):
    job = sample_tfjob()
    cluster.server.faults.drop_next_log_stream_after(1)
    cluster.launch(job)
    chief = [line for line in cluster.lines if line.startswith("[chief-0] ") and "pod " not in line]
    assert chief == ["[chief-0] epoch 1/2 loss=0.91", "[chief-0] epoch 2/2 loss=0.42",
                     "[chief-0] saved model"]
    assert len(cluster.server.requests.matching(resource="pods/log")) == 2


@pytest.mark.parametrize("job, operator_name", [(sample_tfjob(), "Kubeflow Training Operator"),
                                                (sample_mpijob(), "MPI Operator")])
def test_missing_crd_says_which_operator_to_install(cluster, job, operator_name):
    cluster.server.faults.uninstall(job.kind.plural)
    with pytest.raises(CrdNotInstalledError) as raised:
        cluster.launch(job)
    message = str(raised.value)
    crd = f"{job.kind.crd_name}, {job.kind.api_version}"
    assert f"the {job.kind.kind} CRD ({crd}) is not installed" in message
    assert f"install the {operator_name}: {job.kind.install_hint}" in message
    assert cluster.server.requests.matching(verb="delete") == []


def test_missing_job_is_not_mistaken_for_a_missing_crd(cluster):
    job = sample_tfjob()
    with pytest.raises(NotFoundError) as raised:
        cluster.api.get_job(job.kind, job.namespace, "no-such-job")
    assert not isinstance(raised.value, CrdNotInstalledError)
    assert 'tfjobs.kubeflow.org "no-such-job" not found' in str(raised.value)


def test_log_permission_denied_stops_only_the_log_stream(cluster):
    cluster.server.faults.forbid("get", "pods/log")
    outcome = cluster.launch(sample_tfjob())
    assert outcome.reason == "TFJobSucceeded"
    [stopped] = [line for line in cluster.lines if line.startswith("[logs] stopped following")]
    assert "RBAC denied get pods/log in namespace kubeflow" in stopped


def test_owner_in_another_namespace_is_not_referenced():
    body = prepare_body(sample_tfjob(), OwnerRef("other-ns", "step", "uid-1"))
    assert "ownerReferences" not in body["metadata"]


def test_own_pod_reference_from_kfp_env_and_from_hostname(cluster, monkeypatch):
    monkeypatch.setenv("KFP_POD_NAMESPACE", "kubeflow")
    monkeypatch.setenv("KFP_POD_NAME", "step-pod")
    monkeypatch.setenv("KFP_POD_UID", "uid-from-env")
    assert cluster.api.read_own_pod_reference() == OwnerRef("kubeflow", "step-pod", "uid-from-env")
    monkeypatch.delenv("KFP_POD_NAME")
    monkeypatch.delenv("KFP_POD_UID")
    monkeypatch.setenv("HOSTNAME", "step-pod-2")
    pod = cluster.server.store.create(PODS + ("kubeflow", "step-pod-2"), {"metadata": {}, "spec": {}})
    assert cluster.api.read_own_pod_reference().uid == pod["metadata"]["uid"]


def _wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)
