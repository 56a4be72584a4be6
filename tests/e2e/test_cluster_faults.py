"""A replica SIGKILLed mid-epoch on the cluster path: the operator restarts it, the job resumes.

The training step runs `runtime.train(backend=tfjob|mpijob|trainjob)` against the test
API server, whose process operator restarts replicas the way the Training
Operator (ExitCode: a retryable exit re-creates the pod) and the MPI
Operator's launcher Job (OnFailure: the container restarts in place) do. The
replicas publish their backup to the work location on the GCS emulator after
every epoch and restore it when they start again.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading

import pytest

from kfdist.components.evaluate_model.runtime import evaluate
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.kubernetes.build.job_spec import job_name_for
from fakes.kube_server.cluster_fixtures import Log, step_options

pytestmark = pytest.mark.slow

EPOCHS = 5
KILL_AFTER_EPOCH = 2
SETTINGS = dict(epochs=EPOCHS, batch_size_per_replica=8, workers=2)


class KillMidEpoch(Log):
    """The step's log; SIGKILLs one replica process shortly after epoch `KILL_AFTER_EPOCH`."""

    def __init__(self, leader_prefix: str, find_victim):
        super().__init__()
        self.leader_prefix = leader_prefix
        self.find_victim = find_victim
        self.killed = threading.Event()
        self.victim = None

    def __call__(self, line: str) -> None:
        super().__call__(line)
        if (re.match(rf"{re.escape(self.leader_prefix)}epoch {KILL_AFTER_EPOCH}/", line)
                and not self.killed.is_set()):
            self.killed.set()
            self.victim = self.find_victim(self)
            threading.Timer(0.3, os.kill, (self.victim, signal.SIGKILL)).start()

    def epochs_completed(self):
        return [int(m.group(1)) for line in self.lines
                for m in [re.match(rf"{re.escape(self.leader_prefix)}epoch (\d+)/", line)] if m]


def test_a_killed_tfjob_worker_is_restarted_and_the_job_resumes(cluster, dataset_uri,
                                                               digits_dataset, tmp_path):
    """MultiWorkerMirrored, restartPolicy ExitCode: worker 1 gets SIGKILL (137, retryable);
    worker 0 loses its peer and exits 138 (retryable); both pods are re-created."""
    name = job_name_for("run-kill", "train-distributed")
    log = KillMidEpoch("[worker-0] ", lambda _: cluster.operator.replica_pids(name, "worker-1")[-1])
    model_dir = str(tmp_path / "model")
    report = runtime.train(digits_dataset, model_dir, backend="tfjob",
                           strategy="multi_worker_mirrored", restart_policy="ExitCode",
                           **step_options(run_id="run-kill"), dataset_uri=dataset_uri,
                           log=log, **SETTINGS)

    assert log.killed.is_set()
    assert len(cluster.operator.replica_pids(name, "worker-1")) == 2
    assert len(cluster.operator.replica_pids(name, "worker-0")) == 2
    worker_0 = cluster.operator.replica_output(name, "worker-0")
    assert any("lost a peer" in line and "exiting with 138" in line for line in worker_0), worker_0
    assert any(f"TFJob kubeflow-test/{name}: Restarting (TFJobRestarting)" in line
               for line in log.lines), log.lines
    assert report.restarts == 2  # the step counted both re-created pods
    resumed = [line for line in log.lines if "resuming from the backup" in line]
    assert resumed and report.initial_epoch >= KILL_AFTER_EPOCH
    assert log.epochs_completed()[-1] == EPOCHS
    assert report.epochs == EPOCHS
    assert evaluate(model_dir, digits_dataset, log=lambda line: None).accuracy >= 0.90
    with open(os.path.join(model_dir, "training_report.json")) as f:
        assert json.load(f)["restarts"] == 2  # what the step's `restarts` metric reports


def test_a_killed_trainjob_node_is_re_created_and_the_job_resumes(cluster, dataset_uri,
                                                                  digits_dataset, tmp_path):
    """kfdist-tensorflow's pod failure policy: node 1 (worker 1) gets SIGKILL (137) and node 0
    loses its peer (138); neither is a permanent exit, so the Job re-creates both pods (same
    hostnames, new names) and the job resumes from the published backup."""
    name = job_name_for("run-tj-kill", "train-distributed")
    log = KillMidEpoch("[node-0] ", lambda _: cluster.operator.replica_pids(name, "node-1")[-1])
    model_dir = str(tmp_path / "model")
    report = runtime.train(digits_dataset, model_dir, backend="trainjob",
                           strategy="multi_worker_mirrored", **step_options(run_id="run-tj-kill"),
                           dataset_uri=dataset_uri, log=log, **SETTINGS)

    assert log.killed.is_set()
    assert len(cluster.operator.replica_pids(name, "node-1")) == 2
    assert len(cluster.operator.replica_pids(name, "node-0")) == 2
    node_0 = cluster.operator.replica_output(name, "node-0")
    assert any("lost a peer" in line and "exiting with 138" in line for line in node_0), node_0
    assert report.restarts == 2  # the step counted both re-created pods
    assert report.initial_epoch >= KILL_AFTER_EPOCH
    assert log.epochs_completed()[-1] == EPOCHS
    assert evaluate(model_dir, digits_dataset, log=lambda line: None).accuracy >= 0.90


def _rank_1_pid(log: Log) -> int:
    [pid] = {int(m.group(1)) for line in log.lines
             for m in [re.search(r"replica rank:1 pid=(\d+)", line)] if m}
    return pid


def test_a_killed_horovod_rank_restarts_the_mpijob_launcher_and_the_job_resumes(
        cluster, dataset_uri, digits_dataset, tmp_path):
    """Horovod, launcher restartPolicy OnFailure: rank 1 gets SIGKILL, mpirun fails, the
    launcher Job's pod restarts in place and a new mpirun resumes from rank 0's backup."""
    log = KillMidEpoch("[launcher] ", _rank_1_pid)
    model_dir = str(tmp_path / "model")
    report = runtime.train(digits_dataset, model_dir, backend="mpijob", strategy="horovod",
                           restart_policy="OnFailure", **step_options(run_id="run-hvd-kill"),
                           dataset_uri=dataset_uri, log=log, **SETTINGS)

    assert log.killed.is_set()
    assert report.restarts == 1  # the launcher's container, restarted once
    assert any("resuming from the backup" in line for line in log.lines), "\n".join(log.lines)
    assert report.initial_epoch >= KILL_AFTER_EPOCH
    assert [r.task for r in report.replicas] == ["rank:0", "rank:1"]
    assert len({r.weights_sha256 for r in report.replicas}) == 1
    assert evaluate(model_dir, digits_dataset, log=lambda line: None).accuracy >= 0.90
