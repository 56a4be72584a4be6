"""A cluster job's shared work location, and the program its replicas run.

On a cluster the launcher (the KFP step) and the replicas (TFJob/MPIJob pods)
share no filesystem by default, so they meet at a *work location*: a `gs://`
prefix, or a directory on a volume every pod mounts (a PVC)::

    <work_uri>/job.json      JobConfig; its dataset_dir is the dataset's URI
    <work_uri>/dataset/      the dataset, when the launcher had to upload it
    <work_uri>/model/        the leader's training state after every epoch (backup/,
                             checkpoints/, history.json), then its Model artifact
    <work_uri>/reports/      every replica's report and the chief's summary

Each replica runs `python -m kfdist.components.train_distributed.shared_job
--work-uri URI`: it stages the dataset locally, trains exactly as a local
replica does (same code, TF_CONFIG injected by the operator), then uploads.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import traceback
from typing import Optional, Sequence

import kfdist  # noqa: F401  (legacy Keras before TensorFlow loads)
from kfdist.components.common import storage
from kfdist.components.train_distributed import config

JOB_FILE = "job.json"


@dataclasses.dataclass(frozen=True)
class SharedJobLayout:
    """Where a job's files live under its work location.

    Attributes:
      work_uri: A `gs://` prefix or a directory on a shared volume.
    """

    work_uri: str

    @property
    def job_file(self) -> str:
        """The JobConfig the replicas read."""
        return storage.join(self.work_uri, JOB_FILE)

    @property
    def dataset_uri(self) -> str:
        """Where the launcher uploads a dataset the replicas cannot reach otherwise."""
        return storage.join(self.work_uri, "dataset")

    @property
    def model_uri(self) -> str:
        """Where the chief uploads the Model artifact."""
        return storage.join(self.work_uri, "model")

    @property
    def reports_uri(self) -> str:
        """Where every replica uploads its report."""
        return storage.join(self.work_uri, "reports")


def replica_command(work_uri: str) -> Sequence[str]:
    """The container command of every replica of a cluster job."""
    return ("python", "-u", "-m", "kfdist.components.train_distributed.shared_job",
            "--work-uri", work_uri)


def run_shared_replica(layout: SharedJobLayout, scratch: str) -> None:
    """Stages inputs, trains this replica, and uploads its outputs.

    Args:
      layout: The job's work location.
      scratch: A private local directory for the staged dataset and outputs.
    """
    from kfdist.components.train_distributed import backup_sync, replica  # import TensorFlow

    storage.download(layout.job_file, os.path.join(scratch, JOB_FILE))
    template = config.JobConfig.read(os.path.join(scratch, JOB_FILE))
    dataset_dir = storage.copy_dir_from(template.dataset_dir, os.path.join(scratch, "dataset"))
    job = dataclasses.replace(template, dataset_dir=dataset_dir,
                              model_dir=os.path.join(scratch, "model"),
                              work_dir=os.path.join(scratch, "reports"))
    job = dataclasses.replace(job, state_uri=layout.model_uri)
    os.makedirs(job.model_dir)
    os.makedirs(job.work_dir)
    backup_sync.restore(layout.model_uri, job.model_dir, replica.log)
    outcome = replica.train_replica(job)
    storage.copy_dir_to(job.work_dir, layout.reports_uri)
    if outcome is not None and outcome.leader:
        storage.copy_dir_to(job.model_dir, layout.model_uri)
        backup_sync.discard_backup(layout.model_uri)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs one replica of a cluster job; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-uri", required=True, help="the job's work location")
    args = parser.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="kfdist-replica-") as scratch:
            run_shared_replica(SharedJobLayout(args.work_uri), scratch)
    except Exception as e:  # noqa: BLE001 -- the operator reports the exit code; the log says why
        traceback.print_exc()
        print(f"replica failed: {type(e).__name__}: {e}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
