"""A cluster replica's inputs and outputs: staged from, and uploaded to, the job's work location."""

from __future__ import annotations

import dataclasses
import os

from kfdist.components.common import storage
from kfdist.components.train_distributed.job import config
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
    dataset_dir = storage.copy_dir_from(template.dataset_dir, os.path.join(scratch, "dataset"))
    job = dataclasses.replace(template, dataset_dir=dataset_dir,
                              model_dir=os.path.join(scratch, "model"),
                              work_dir=os.path.join(scratch, "reports"))
    job = dataclasses.replace(job, state_uri=layout.model_uri)
    os.makedirs(job.model_dir)
    os.makedirs(job.work_dir)
    backup_sync.restore(layout.model_uri, job.model_dir, log)
    outcome = train_replica(job)
    storage.copy_dir_to(job.work_dir, layout.reports_uri)
    if outcome is not None and outcome.leader:
        storage.copy_dir_to(job.model_dir, layout.model_uri)
        backup_sync.discard_backup(layout.model_uri)
