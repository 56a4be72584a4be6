"""Validated settings of a `train_distributed` job, shared by launcher and replicas.

Three frozen records describe a job:

* `TrainingConfig`: what to train and how (model, epochs, batch, optimiser,
  seed, distribution strategy); identical in every replica.
* `JobSpec`: where the replicas run (backend) and how many there are.
* `JobConfig`: both, plus the job's directories; the launcher writes it as
  JSON and every replica reads it (`replica --config JOB.json`).

Every check raises `InvalidInputError` naming the bad value and the valid
ones, before anything is launched. The tables below say which strategies each
backend runs; new strategies (`mirrored`, `parameter_server`, `horovod`) and
backends (`tfjob`, `mpijob`) are added there and in the matching factories.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Dict, Tuple

from kfdist.components.common.errors import InvalidInputError, require

MULTI_WORKER_MIRRORED = "multi_worker_mirrored"
LOCAL_BACKEND = "local"
TFJOB_BACKEND = "tfjob"

#: Strategies each backend can run, by backend name.
STRATEGIES_BY_BACKEND: Dict[str, Tuple[str, ...]] = {
    LOCAL_BACKEND: (MULTI_WORKER_MIRRORED,),
    TFJOB_BACKEND: (MULTI_WORKER_MIRRORED,),
}
BACKENDS: Tuple[str, ...] = tuple(STRATEGIES_BY_BACKEND)

#: At most this many worker processes on one machine (a typo guard, not a TF limit).
MAX_LOCAL_WORKERS = 32


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """What every replica trains, and how.

    Attributes:
      model_name: `mnist_mlp`, `mnist_cnn` or a user model `package.module:function`.
      epochs: Passes over the training split.
      batch_size_per_replica: Examples per replica per step; the global batch
        is this times the number of replicas in sync.
      learning_rate: Adam learning rate.
      seed: Seed of weight initialisation, dropout and shuffling.
      strategy: Distribution strategy name, e.g. `multi_worker_mirrored`.
    """

    model_name: str
    epochs: int
    batch_size_per_replica: int
    learning_rate: float
    seed: int
    strategy: str

    def validate(self) -> None:
        """Checks the values that need no dataset and no model import.

        Raises:
          InvalidInputError: Naming the first invalid value.
        """
        require(isinstance(self.model_name, str) and bool(self.model_name.strip()),
                f"model_name must be a non-empty string, got {self.model_name!r}")
        require(_is_int(self.epochs) and self.epochs >= 1,
                f"epochs must be an integer >= 1, got {self.epochs!r}")
        require(_is_int(self.batch_size_per_replica) and self.batch_size_per_replica >= 1,
                f"batch_size_per_replica must be an integer >= 1, got {self.batch_size_per_replica!r}")
        require(isinstance(self.learning_rate, (int, float)) and not isinstance(self.learning_rate, bool)
                and math.isfinite(self.learning_rate) and self.learning_rate > 0,
                f"learning_rate must be a finite number > 0, got {self.learning_rate!r}")
        require(_is_int(self.seed) and self.seed >= 0,
                f"seed must be an integer >= 0, got {self.seed!r}")


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """Where and how many replicas run.

    Attributes:
      backend: `local` (processes on this machine); `tfjob`/`mpijob` later.
      workers: Number of worker replicas; worker 0 is the chief.
    """

    backend: str
    workers: int

    def validate(self, strategy: str) -> None:
        """Checks the backend, the worker count and that the backend runs `strategy`.

        Raises:
          InvalidInputError: Naming the first invalid value and the valid ones.
        """
        require(self.backend in STRATEGIES_BY_BACKEND,
                f"unknown backend {self.backend!r}; valid backends: {list(BACKENDS)}")
        supported = STRATEGIES_BY_BACKEND[self.backend]
        require(strategy in supported,
                f"strategy {strategy!r} is not supported by the {self.backend!r} backend; "
                f"valid strategies: {list(supported)}")
        require(_is_int(self.workers) and self.workers >= 1,
                f"workers must be an integer >= 1, got {self.workers!r}")
        if self.backend == LOCAL_BACKEND:
            require(self.workers <= MAX_LOCAL_WORKERS,
                    f"workers={self.workers} is too many for the local backend; "
                    f"use at most {MAX_LOCAL_WORKERS}")


@dataclasses.dataclass(frozen=True)
class JobConfig:
    """Everything a replica needs; written once by the launcher as JSON.

    Attributes:
      dataset_dir: Local kfdist dataset directory (see `dataset_spec`).
      model_dir: Local directory the chief writes the Model artifact into.
      work_dir: Job-private directory: replica reports, non-chief scratch
        saves, and (with `dump_weights`) every replica's final weights.
      training: What to train.
      job: Where the replicas run.
      dump_weights: Debug aid: each replica also writes its final weights to
        `work_dir/weights-<type>-<index>.npz`.
    """

    dataset_dir: str
    model_dir: str
    work_dir: str
    training: TrainingConfig
    job: JobSpec
    dump_weights: bool = False

    def validate(self) -> None:
        """Validates the training settings and the job spec together."""
        self.training.validate()
        self.job.validate(self.training.strategy)

    def to_json(self) -> str:
        """Serialises to JSON."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "JobConfig":
        """Parses JSON written by `to_json`."""
        d = json.loads(text)
        return cls(dataset_dir=d["dataset_dir"], model_dir=d["model_dir"], work_dir=d["work_dir"],
                   training=TrainingConfig(**d["training"]), job=JobSpec(**d["job"]),
                   dump_weights=bool(d.get("dump_weights", False)))

    def write(self, path: str) -> None:
        """Writes the JSON form to `path`."""
        with open(path, "w") as f:
            f.write(self.to_json())

    @classmethod
    def read(cls, path: str) -> "JobConfig":
        """Reads a config written by `write`.

        Raises:
          InvalidInputError: If `path` does not exist.
        """
        try:
            with open(path) as f:
                return cls.from_json(f.read())
        except FileNotFoundError:
            raise InvalidInputError(f"job config {path!r} does not exist") from None


# Files in a job's work_dir, shared by the replicas (writers) and the launcher (reader).
CHIEF_SUMMARY_FILE = "chief-summary.json"
#: The launcher's pid, in every replica's environment: a replica whose launcher is gone exits.
LAUNCHER_PID_ENV = "KFDIST_LAUNCHER_PID"


def replica_report_path(work_dir: str, task_label: str) -> str:
    """Where replica `task_label` (e.g. `worker-1`) writes its `ReplicaReport`."""
    return os.path.join(work_dir, f"replica-{task_label}.json")


def weights_dump_path(work_dir: str, task_label: str) -> str:
    """Where replica `task_label` dumps its final weights when `dump_weights` is set."""
    return os.path.join(work_dir, f"weights-{task_label}.npz")


def scratch_dir(work_dir: str, task_label: str) -> str:
    """A non-chief replica's scratch directory for saves that must not reach model_dir."""
    return os.path.join(work_dir, f"scratch-{task_label}")
