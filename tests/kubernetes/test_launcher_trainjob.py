"""The launcher's guarantees for a TrainJob, against the test API server and Trainer controller.

The same scenarios as for TFJobs and MPIJobs (test_launcher.py), here with the
process-running Trainer, JobSet and Job controllers of `kube_server` and tiny
node programs (`sample_trainjob`): a killed launcher whose retry re-attaches (and
adds its pod as a second owner), 410 Gone, 5xx, the CRD missing. (Success with
node 0's log streamed, a killed node re-created, SIGTERM and a timeout deleting
the TrainJob, its JobSet and pods, a failure with Trainer's reason, a runtime
Trainer does not have, and an RBAC refusal run on the real control plane:
tests/containers/.)
"""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi, OwnerRef
from kfdist.components.train_distributed.kubernetes.client.kube_errors import CrdNotInstalledError
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import launch_and_wait
from fakes.kube_server import launch_cli
from fakes.kube_server.cluster_fixtures import NAMESPACE
from fakes.kube_server.sample_jobs import sample_trainjob
from fakes.kube_server.trainer_objects import TRAINJOBS


def _launch(cluster, job, lines: List[str], timeout_seconds: float = 30.0, owner=None):
    api = KubeApi(cluster.server.api_client())
    return launch_and_wait(job, api, timeout_seconds=timeout_seconds, log=lines.append, owner=owner)


def _trainjobs(cluster):
    return cluster.server.store.items(TRAINJOBS, NAMESPACE)


def _job(**env):
    return sample_trainjob(namespace=NAMESPACE, **env)


def test_retry_after_the_launcher_was_killed_reattaches(cluster):
    first = _launcher_process(cluster, "run-1-trainjob", "--owner-uid", "pod-uid-attempt-1")
    launch_cli.wait_for_line(first, "[node-0] epoch 1/2", timeout=20)
    first.kill()
    first.wait(5)
    [created] = _trainjobs(cluster)
    lines: List[str] = []
    outcome = _launch(cluster, sample_trainjob(namespace=NAMESPACE, SLEEP_0=3), lines,
                      owner=OwnerRef(NAMESPACE, "step-pod-2", "pod-uid-attempt-2"))
    assert outcome.adopted and outcome.uid == created["metadata"]["uid"]
    assert any("Re-attaching to TrainJob kubeflow-test/run-1-trainjob" in line for line in lines)
    owners = [r["uid"] for r in _trainjobs(cluster)[0]["metadata"]["ownerReferences"]]
    assert owners == ["pod-uid-attempt-1", "pod-uid-attempt-2"]


def test_410_and_5xx_while_watching_are_survived(cluster):
    lines: List[str] = []
    job = _job(SLEEP_0=2)

    def trouble():
        time.sleep(0.8)
        cluster.server.faults.fail_next(2, 503, path_contains="/trainjobs")
        cluster.server.faults.drop_watches()
        cluster.server.store.compact()
    threading.Thread(target=trouble, daemon=True).start()
    outcome = _launch(cluster, job, lines)
    assert outcome.reason == "AllJobsCompleted"
    assert "Watch expired (410 Gone): re-reading the job and watching afresh" in lines


def test_a_missing_crd_names_kubeflow_trainer(cluster):
    cluster.server.faults.uninstall("trainjobs")
    with pytest.raises(CrdNotInstalledError) as raised:
        _launch(cluster, _job(), [])
    message = str(raised.value)
    assert ("the TrainJob CRD (trainjobs.trainer.kubeflow.org, trainer.kubeflow.org/v1alpha1) is "
            "not installed: install the Kubeflow Trainer") in message
    assert "kubectl apply --server-side -k manifests/runtimes" in message


def _launcher_process(cluster, job_name: str, *args):
    return launch_cli.start(cluster.server.url, job_name, "--trainjob-namespace", NAMESPACE, *args)
