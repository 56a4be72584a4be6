"""Fixtures of the cluster path: the API server with the process operator (and Kubeflow Trainer's
CRD and kfdist's runtimes installed), a kubeconfig that points the training step at it, and the
dataset on the GCS emulator. Registered by tests/conftest.py."""

from __future__ import annotations

import json
import time
from typing import Any, Dict, List

import pytest

from fakes.kube_server.process_operator import ProcessOperator
from fakes.kube_server.server import KubeServer
from fakes.kube_server.trainer_objects import install_trainer
from fakes.process_state import is_running
from cluster.fixture import wait_for  # noqa: F401  (the tests import it from here too)

NAMESPACE = "kubeflow-test"
BUCKET = "kfdist-e2e"
TFJOBS = ("kubeflow.org", "v1", "tfjobs")
PODS = ("", "v1", "pods")
STEP_TIMEOUT_S = 150.0  # a hang fails the test (and deletes the job) instead of blocking the run


class Log:
    """Collects the step's log lines."""

    def __init__(self):
        self.lines: List[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)

    def starting(self, prefix: str) -> List[str]:
        return [line for line in self.lines if line.startswith(prefix)]


class Cluster:
    """The API server, its process operator, and the kubeconfig the step reads."""

    def __init__(self, server: KubeServer, operator: ProcessOperator, kubeconfig: str):
        self.server, self.operator, self.kubeconfig = server, operator, kubeconfig

    def jobs(self):
        return self.server.store.items(TFJOBS, NAMESPACE)

    def wait_no_processes(self, seconds: float = 15.0) -> List[int]:
        deadline = time.monotonic() + seconds
        while self.operator.running_pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.operator.running_pids()


def _write_kubeconfig(path: str, server_url: str) -> str:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "kube-server",
              "clusters": [{"name": "kube-server", "cluster": {"server": server_url}}],
              "users": [{"name": "pipeline-runner", "user": {}}],
              "contexts": [{"name": "kube-server", "context": {
                  "cluster": "kube-server", "user": "pipeline-runner", "namespace": NAMESPACE}}]}
    with open(path, "w") as f:
        json.dump(config, f)  # JSON is YAML
    return path


@pytest.fixture
def cluster_operator():
    """Makes the operator of `cluster` from the server's store; a test module may override it
    (e.g. with a scripted `FakeOperator`)."""
    return ProcessOperator


@pytest.fixture
def cluster(gcs_emulator, tmp_path, monkeypatch, cluster_operator):
    """A fake API server with the process operator; `KUBECONFIG` points the step at it."""
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KFP_POD_NAMESPACE",
                 "KFP_POD_NAME", "KFP_POD_UID", "TF_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    server = KubeServer().start()
    install_trainer(server.store)
    operator = cluster_operator(server.store)
    # kfdist reads KUBECONFIG when it connects (`KubeApi.from_environment`), in this process
    # and in the step run as a subprocess alike, so whatever the caller's environment held, the
    # tests reach this server only.
    kubeconfig = _write_kubeconfig(str(tmp_path / "kubeconfig"), server.url)
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    try:
        yield Cluster(server, operator, kubeconfig)
    finally:
        operator.stop()
        server.stop()
    if isinstance(operator, ProcessOperator):
        assert operator.running_pids() == []
        assert not [pid for pid in operator.pids() if is_running(pid)]


@pytest.fixture
def dataset_uri(gcs_emulator, digits_dataset):
    """The digits dataset as a KFP artifact on gs:// (where the shard step would have put it)."""
    from google.api_core.exceptions import Conflict

    try:
        gcs_emulator.create_bucket(BUCKET)
    except Conflict:
        pass
    uri = f"gs://{BUCKET}/pipeline-root/run/shard/dataset"
    if not gcs_emulator.list(uri + "/"):
        gcs_emulator.upload_dir(digits_dataset, uri)
    return uri


def step_options(run_id: str = "run-123", **overrides) -> Dict[str, Any]:
    """The training step's cluster parameters for a job in the test namespace."""
    return dict(namespace=NAMESPACE, run_id=run_id, task_name="train-distributed",
                timeout_seconds=STEP_TIMEOUT_S, **overrides)


@pytest.fixture
def kueue(cluster):
    """A test Kueue on `cluster`: queued MPIJobs and TrainJobs are created suspended; the test
    admits them with `kueue.admit(plural, namespace, name)`."""
    from fakes.kube_server.kueue import FakeKueue

    queue = FakeKueue(cluster.server.store)
    yield queue
    queue.stop()
