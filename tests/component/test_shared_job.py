"""Cluster replicas meet at a shared work location: real TF processes, real GCS emulator.

The test plays the operator's part: it starts two replicas of
`shared_job` with the TF_CONFIG the Training Operator would inject, and a
`gs://` work location served by the GCS emulator.
"""

import json
import os
import subprocess
import sys

import pytest

from kfdist.components.common import storage
from kfdist.components.train_distributed.job import config
from kfdist.components.train_distributed.job import work_files
from kfdist.components.train_distributed.local import local_backend
from kfdist.components.train_distributed.local.ports import free_ports
from kfdist.components.train_distributed.job import tf_config
from kfdist.components.train_distributed.job.work_location import SharedJobLayout, replica_command

pytestmark = pytest.mark.slow


def _job_template(dataset_uri: str) -> config.JobConfig:
    return config.JobConfig(
        dataset_dir=dataset_uri, model_dir="model", work_dir="reports",
        training=config.TrainingConfig(model_name="mnist_mlp", epochs=2, batch_size_per_replica=32,
                                       learning_rate=0.001, seed=7, strategy="multi_worker_mirrored"),
        job=config.JobSpec(backend="tfjob", workers=2))


def test_two_replicas_train_from_and_upload_to_gs(gcs_emulator, digits_dataset, tmp_path):
    gcs_emulator.create_bucket("kfdist-work")
    layout = SharedJobLayout("gs://kfdist-work/jobs/kfdist-train-1234")
    storage.copy_dir_to(digits_dataset, layout.dataset_uri)
    job_file = tmp_path / "job.json"
    _job_template(layout.dataset_uri).write(str(job_file))
    storage.upload_file(str(job_file), layout.job_file)

    cluster = tf_config.worker_cluster([f"localhost:{p}" for p in free_ports(2)])
    procs = []
    for _task, cfg in tf_config.tf_configs(cluster):
        env = local_backend.replica_env(cfg, str(tmp_path))
        env["STORAGE_EMULATOR_HOST"] = gcs_emulator.endpoint
        procs.append(subprocess.Popen([sys.executable, *replica_command(layout.work_uri)[1:]],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-3000:] for o in outputs)

    model_dir = storage.copy_dir_from(layout.model_uri, str(tmp_path / "model"))
    assert os.path.isfile(os.path.join(model_dir, "saved_model", "saved_model.pb"))
    assert os.path.isfile(os.path.join(model_dir, "history.json"))
    reports_dir = storage.copy_dir_from(layout.reports_uri, str(tmp_path / "reports"))
    reports = [json.load(open(os.path.join(reports_dir, f"replica-worker-{i}.json"))) for i in (0, 1)]
    assert {r["num_replicas_in_sync"] for r in reports} == {2}
    assert reports[0]["weights_sha256"] == reports[1]["weights_sha256"]
    assert reports[0]["pid"] != reports[1]["pid"]
    assert os.path.isfile(os.path.join(reports_dir, work_files.CHIEF_SUMMARY_FILE))
