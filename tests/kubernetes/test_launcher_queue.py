"""Jobs that wait in a Kueue queue: the launcher says so, and counts its timeout as asked.

The test Kueue (`kube_server.kueue`) suspends queued MPIJobs and TrainJobs when
they are created, as Kueue's webhook does; the test admits them. The test
Trainer and Training Operator hold a suspended job's pods back and write its
`Suspended` condition, then `Resumed`. The timeout counted from admission or from creation runs
on the real Kueue: tests/containers/test_launcher_on_the_bed.py.
"""

from __future__ import annotations

import threading
from typing import List

from kfdist.components.train_distributed.kubernetes.build.job_kinds import TFJOB_V1, RenderedJob
from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi
from kfdist.components.train_distributed.kubernetes.lifecycle.job_queue import QUEUE_NAME_LABEL
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import launch_and_wait
from fakes.kube_server.cluster_fixtures import NAMESPACE
from fakes.kube_server.kueue import FakeKueue
from fakes.kube_server.sample_jobs import sample_trainjob
from fakes.kube_server.trainer_objects import TRAINJOBS

TFJOBS = ("kubeflow.org", "v1", "tfjobs")


def _queued_trainjob(**env) -> RenderedJob:
    job = sample_trainjob(namespace=NAMESPACE, **env)
    job.body["metadata"]["labels"][QUEUE_NAME_LABEL] = "team-queue"
    return job


def _queued_tfjob(name: str) -> RenderedJob:
    """A one-worker TFJob in the queue `team-queue` whose worker prints and exits."""
    container = {"name": "tensorflow", "image": "ghcr.io/kfdist/kfdist-runtime:0.1.0",
                 "command": ["python", "-c", "print('trained', flush=True)"]}
    body = {"apiVersion": TFJOB_V1.api_version, "kind": "TFJob",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": {QUEUE_NAME_LABEL: "team-queue"}},
            "spec": {"runPolicy": {}, "tfReplicaSpecs": {"Worker": {
                "replicas": 1, "restartPolicy": "Never",
                "template": {"spec": {"containers": [container]}}}}}}
    return RenderedJob(TFJOB_V1, name, NAMESPACE, body, {"training.kubeflow.org/job-name": name})


def _admit_after(kueue: FakeKueue, plural: str, name: str, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, kueue.admit, (plural, NAMESPACE, name))
    timer.start()
    return timer


def _launch(cluster, job, lines: List[str], **kwargs):
    return launch_and_wait(job, KubeApi(cluster.server.api_client()), log=lines.append,
                           owner=None, **kwargs)


def test_a_queued_trainjob_is_reported_queued_until_admitted(cluster, kueue):
    job = _queued_trainjob()
    _admit_after(kueue, "trainjobs", job.name, 1.5)
    lines: List[str] = []
    outcome = _launch(cluster, job, lines, timeout_seconds=30)
    assert outcome.reason == "AllJobsCompleted"
    queued = [i for i, line in enumerate(lines) if "is queued: suspended until Kueue admits it "
              "(queue team-queue)" in line]
    admitted = [i for i, line in enumerate(lines) if "was admitted after" in line]
    assert len(queued) == 1 and len(admitted) == 1 and queued[0] < admitted[0], lines
    assert any("TrainJob kubeflow-test/run-1-trainjob: Suspended (Suspended): TrainJob is "
               "suspended" in line for line in lines)
    [trainjob] = cluster.server.store.items(TRAINJOBS, NAMESPACE)
    suspended = [c for c in trainjob["status"]["conditions"] if c["type"] == "Suspended"]
    assert [(c["status"], c["reason"]) for c in suspended] == [("False", "Resumed")]
    assert kueue.suspended == [("trainjobs", NAMESPACE, job.name)]


def test_a_queued_tfjob_is_held_and_resumed_by_the_training_operator(cluster):
    kueue = FakeKueue(cluster.server.store, enabled=["kubeflow.org/tfjob"])
    container = {"name": "tensorflow", "image": "ghcr.io/kfdist/kfdist-runtime:0.1.0",
                 "command": ["python", "-c", "print('trained', flush=True)"]}
    body = {"apiVersion": TFJOB_V1.api_version, "kind": "TFJob",
            "metadata": {"name": "queued-tf", "namespace": NAMESPACE,
                         "labels": {QUEUE_NAME_LABEL: "team-queue"}},
            "spec": {"runPolicy": {}, "tfReplicaSpecs": {"Worker": {
                "replicas": 1, "restartPolicy": "Never",
                "template": {"spec": {"containers": [container]}}}}}}
    job = RenderedJob(TFJOB_V1, "queued-tf", NAMESPACE, body,
                      {"training.kubeflow.org/job-name": "queued-tf"})
    _admit_after(kueue, "tfjobs", "queued-tf", 1.0)
    lines: List[str] = []
    try:
        outcome = _launch(cluster, job, lines, timeout_seconds=30)
    finally:
        kueue.stop()
    assert outcome.reason == "TFJobSucceeded"
    assert any("Suspended (TFJobSuspended): TFJob queued-tf is suspended." in line for line in lines)
    [tfjob] = cluster.server.store.items(TFJOBS, NAMESPACE)
    [suspended] = [c for c in tfjob["status"]["conditions"] if c["type"] == "Suspended"]
    assert (suspended["status"], suspended["reason"], suspended["message"]) == (
        "False", "TFJobResumed", "TFJob queued-tf is resumed.")


def test_without_the_tfjob_integration_a_queued_tfjob_runs_at_once(cluster, kueue):
    container = {"name": "tensorflow", "image": "ghcr.io/kfdist/kfdist-runtime:0.1.0",
                 "command": ["python", "-c", "print('trained', flush=True)"]}
    body = {"apiVersion": TFJOB_V1.api_version, "kind": "TFJob",
            "metadata": {"name": "unqueued", "namespace": NAMESPACE,
                         "labels": {QUEUE_NAME_LABEL: "team-queue"}},
            "spec": {"runPolicy": {}, "tfReplicaSpecs": {"Worker": {
                "replicas": 1, "restartPolicy": "Never",
                "template": {"spec": {"containers": [container]}}}}}}
    job = RenderedJob(TFJOB_V1, "unqueued", NAMESPACE, body,
                      {"training.kubeflow.org/job-name": "unqueued"})
    lines: List[str] = []
    assert _launch(cluster, job, lines, timeout_seconds=30).reason == "TFJobSucceeded"
    assert kueue.suspended == [] and not any("is queued:" in line for line in lines)
