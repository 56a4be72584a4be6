"""The launcher under faults the real control plane cannot be made to produce on demand: a watch
dropped and its history compacted (410 Gone), bursts of 5xx answers, a log stream cut midway,
a pod's status reporting its container's exit late.

Nothing in the client is patched: `kube_server` speaks the apiserver's protocol
(watch streams, Status errors, 410 Gone, chunked logs) and a scripted operator
moves pods and job conditions the way the Training and MPI operators do (and,
for a TrainJob, Kubeflow Trainer v2.3 with JobSet). Every
other claim of the launcher runs on the real control plane (tests/containers/:
logs streamed through Pending, a failed image pull, an OOM kill, a FailedMount
event, a missing CRD, a refused log stream, SIGTERM, the owner reference and the
step's own pod, an RBAC refusal naming the Role, a retry's two owners, an earlier
attempt's failed job replaced, a foreign job of the same name left alone).
"""

from __future__ import annotations

import dataclasses
import signal
import time
from typing import List

import pytest

from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi, OwnerRef
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import (
    cancel_on_sigterm, launch_and_wait, prepare_body)
from fakes.kube_server import FakeOperator, KubeServer, Scenario, sample_tfjob, sample_trainjob

TFJOBS = ("kubeflow.org", "v1", "tfjobs")
TRAINJOBS = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
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


def test_410_and_5xx_while_watching_a_trainjob_are_survived(cluster):
    job = sample_trainjob()

    def trouble():  # 5xx answers to the re-watch, then the history compacted past the TrainJob
        cluster.server.faults.fail_next(2, 503, path_contains="/trainjobs")
        cluster.server.faults.drop_watches()
        cluster.server.store.create(("", "v1", "events", "kubeflow", "unrelated"), {"metadata": {}})
        cluster.server.store.compact()
    cluster.operator.script(job.name, Scenario(on_running=trouble, run_seconds=1.2))
    outcome = cluster.launch(job)
    assert outcome.reason == "AllJobsCompleted"
    assert "Watch expired (410 Gone): re-reading the job and watching afresh" in cluster.lines
    assert sum("Kubernetes API unavailable" in line for line in cluster.lines) >= 2
    assert [line for line in cluster.lines if "saved model" in line] == ["[node-0] saved model"]
    assert len(cluster.jobs(TRAINJOBS)) == 1


def test_log_stream_dropped_midway_resumes_without_duplicates(cluster):
    job = sample_tfjob()
    cluster.server.faults.drop_next_log_stream_after(1)
    cluster.launch(job)
    chief = [line for line in cluster.lines if line.startswith("[chief-0] ") and "pod " not in line]
    assert chief == ["[chief-0] epoch 1/2 loss=0.91", "[chief-0] epoch 2/2 loss=0.42",
                     "[chief-0] saved model"]
    assert len(cluster.server.requests.matching(resource="pods/log")) == 2


def test_a_log_that_ends_before_the_pod_says_so_is_read_again_once_the_pod_changes(cluster):
    """The chief's container has exited (its log has ended) but for 3 s its pod still says it
    runs: the follower waits for the pod's next change, not re-reading the log in a loop."""
    job = sample_tfjob()
    cluster.operator.script(job.name, Scenario(status_lag_seconds=3.0))
    cluster.launch(job)
    chief = [line for line in cluster.lines if line.startswith("[chief-0] ") and "pod " not in line]
    assert chief == ["[chief-0] epoch 1/2 loss=0.91", "[chief-0] epoch 2/2 loss=0.42",
                     "[chief-0] saved model"]
    assert len(cluster.server.requests.matching(resource="pods/log")) <= 2


def test_owner_in_another_namespace_is_not_referenced():
    body = prepare_body(sample_tfjob(), OwnerRef("other-ns", "step", "uid-1"))
    assert "ownerReferences" not in body["metadata"]
