"""A cluster replica's inputs and outputs: staged from, and uploaded to, the job's work location."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Sequence

from kfdist.components.common import local_copy, storage
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed.job import config, jobset_cluster, strategy_rules, tf_config
from kfdist.components.train_distributed.job import work_files
from kfdist.components.train_distributed.job.work_location import JOB_FILE, SharedJobLayout
from kfdist.components.train_distributed.replica import backup_sync
from kfdist.components.train_distributed.replica.outputs import log
from kfdist.components.train_distributed.replica.train import train_replica


def run_shared_replica(layout: SharedJobLayout, scratch: str) -> None:
    """Stages inputs, trains this replica, and uploads its outputs.

    Args:
      layout: The job's work location.
      scratch: A private local directory for the staged dataset and outputs.
    """
    storage.download(layout.job_file, os.path.join(scratch, JOB_FILE))
    template = config.JobConfig.read(os.path.join(scratch, JOB_FILE))
    dataset_dir = shared_dataset_dir(template.dataset_dir, layout.job_file)
    job = dataclasses.replace(template, dataset_dir=dataset_dir,
                              model_dir=os.path.join(scratch, "model"),
                              work_dir=os.path.join(scratch, "reports"))
    job = dataclasses.replace(job, state_uri=layout.model_uri)
    install_jobset_tf_config(job)
    os.makedirs(job.model_dir)
    os.makedirs(job.work_dir)
    backup_sync.restore(layout.model_uri, job.model_dir, log)
    outcome = train_replica(job)
    storage.copy_dir_to(job.work_dir, layout.reports_uri)
    if outcome is not None and outcome.leader:
        wait_for_reports(layout.reports_uri, strategy_rules.training_task_labels(
            job.training.strategy, job.job))
        storage.copy_dir_to(job.model_dir, layout.model_uri)
        backup_sync.discard_backup(layout.model_uri)


def shared_dataset_dir(dataset_uri: str, job_uri: str) -> str:
    """Where this replica reads the dataset: a path that is the same in every replica of the job.

    Under parameter_server the chief's input functions run on the workers and name the chief's
    files, so each replica must find the dataset at the chief's path. A PVC path is mounted at
    the same path in every replica: it is read where it is. A remote dataset is staged into a
    directory named after the job and the dataset (each pod stages its own copy there; replicas
    sharing a machine share one, moved into place whole).

    Args:
      dataset_uri: The dataset's location.
      job_uri: The job's file in its work location (one per job).
    """
    if not storage.is_remote(dataset_uri):
        if not os.path.isdir(dataset_uri):
            raise InvalidInputError(f"no such directory: {dataset_uri!r}")
        return dataset_uri
    return local_copy.machine_copy(dataset_uri, "kfdist-dataset", key=job_uri)


def install_jobset_tf_config(job: config.JobConfig) -> None:
    """Sets TF_CONFIG from the pod's JobSet identity in a TrainJob pod (`jobset_cluster`).

    An operator's TF_CONFIG (TFJob) is kept; Horovod ranks need none.
    """
    identity = jobset_cluster.pod_identity(os.environ)
    if (identity is None or os.environ.get(tf_config.TF_CONFIG_ENV)
            or job.training.strategy == strategy_rules.HOROVOD):
        return
    value = jobset_cluster.jobset_tf_config(
        identity, job.job.replica_counts(job.training.strategy), os.environ)
    if value is not None:
        os.environ[tf_config.TF_CONFIG_ENV] = tf_config.to_env_value(value)
        log(f"TF_CONFIG of pod {identity.hostname(identity.completion_index)}: "
            f"{os.environ[tf_config.TF_CONFIG_ENV]}")


#: How long the leader waits for the other training replicas' reports before it exits.
REPORT_WAIT_SECONDS = 300.0


def wait_for_reports(reports_uri: str, task_labels: Sequence[str],
                     timeout_seconds: float = REPORT_WAIT_SECONDS) -> None:
    """Returns once every training replica's report is uploaded, or after `timeout_seconds`.

    The leader's exit can end the job (a TrainJob's runtime succeeds when
    pod 0 does, ending the others): the step reads every training replica's
    report, so the leader leaves only once they are all there. A missing
    report after the timeout is the step's to report.
    """
    wanted = {work_files.replica_report_path(reports_uri, label) for label in task_labels}
    deadline = time.monotonic() + timeout_seconds
    while True:
        missing = sorted(uri for uri in wanted if not storage.exists(uri))
        if not missing or time.monotonic() >= deadline:
            if missing:
                log(f"gave up waiting for {len(missing)} replica report(s): {missing}")
            return
        time.sleep(1.0)
