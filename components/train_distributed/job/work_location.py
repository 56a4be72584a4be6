"""A cluster job's shared work location, and the program its replicas run.

On a cluster the launcher (the KFP step) and the replicas (TFJob/MPIJob pods)
share no filesystem by default, so they meet at a *work location*: a remote
(`gs://`, `s3://`, `minio://`) prefix, or a directory on a volume every pod mounts (a PVC)::

    <work_uri>/job.json      JobConfig; its dataset_dir is the dataset's URI
    <work_uri>/dataset/      the dataset, when the launcher had to upload it
    <work_uri>/model/        the leader's training state after every epoch (backup/,
                             checkpoints/, history.json), then its Model artifact
    <work_uri>/reports/      every replica's report and the chief's summary

Each replica runs `replica_command`: it stages the dataset locally, trains
exactly as a local replica does (same code, TF_CONFIG injected by the
operator), then uploads (`replica.cluster_io`).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from kfdist.components.common import storage

JOB_FILE = "job.json"


@dataclasses.dataclass(frozen=True)
class SharedJobLayout:
    """Where a job's files live under its work location.

    Attributes:
      work_uri: A remote prefix or a directory on a shared volume.
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
    return ("python", "-u", "-m", "kfdist.components.train_distributed.replica",
            "--work-uri", work_uri)
