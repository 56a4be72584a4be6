"""Validated settings of a `train_distributed` job, shared by launcher and replicas.

Three frozen records describe a job:

* `TrainingConfig`: what to train and how (model, epochs, batch, optimiser,
  seed, distribution strategy); identical in every replica.
* `JobSpec`: where the replicas run (backend) and how many there are.
* `JobConfig`: both, plus the job's directories; the launcher writes it as
  JSON and every replica reads it (`replica --config JOB.json`).

Every check raises `InvalidInputError` naming the bad value and the valid
ones, before anything is launched. `STRATEGIES_BY_BACKEND` says which
strategies each backend runs; `replica.STRATEGY_FACTORIES` builds them.

Strategies and the replicas they use:

* `mirrored`: one worker, synchronous over all its local devices;
* `multi_worker_mirrored`: workers (optionally a chief), synchronous all-reduce;
* `parameter_server`: a chief (the coordinator, always present), `ps`
  parameter servers holding the variables, workers running steps asynchronously;
* `horovod`: `workers x slots_per_worker` MPI ranks, all-reduce over MPI.

An `evaluator` (side-car evaluation of each checkpoint) can join every
strategy but `horovod`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Dict, List, Optional, Tuple

from kfdist.components.common.errors import InvalidInputError, require

MIRRORED = "mirrored"
MULTI_WORKER_MIRRORED = "multi_worker_mirrored"
PARAMETER_SERVER = "parameter_server"
HOROVOD = "horovod"
STRATEGIES: Tuple[str, ...] = (MIRRORED, MULTI_WORKER_MIRRORED, PARAMETER_SERVER, HOROVOD)
LOCAL_BACKEND = "local"
TFJOB_BACKEND = "tfjob"
MPIJOB_BACKEND = "mpijob"

#: Strategies each backend can run, by backend name.
STRATEGIES_BY_BACKEND: Dict[str, Tuple[str, ...]] = {
    LOCAL_BACKEND: STRATEGIES,
    TFJOB_BACKEND: (MIRRORED, MULTI_WORKER_MIRRORED, PARAMETER_SERVER),
    MPIJOB_BACKEND: (HOROVOD,),
}
BACKENDS: Tuple[str, ...] = tuple(STRATEGIES_BY_BACKEND)

#: Replica restart policies, as the operators name them (see `local_backend` for their meaning).
RESTART_POLICIES: Tuple[str, ...] = ("Never", "OnFailure", "ExitCode")
#: The MPI Operator accepts only these for MPIJob replicas.
MPI_RESTART_POLICIES: Tuple[str, ...] = ("Never", "OnFailure")
#: The restart policy of a job that sets none, by strategy. TensorFlow jobs restart a
#: replica that was killed or lost a peer (exit codes 128-255) and fail on the rest;
#: Horovod restarts its launcher (mpirun) on failure, as the MPI Operator defaults it.
DEFAULT_RESTART_POLICIES: Dict[str, str] = {
    MIRRORED: "ExitCode", MULTI_WORKER_MIRRORED: "ExitCode", PARAMETER_SERVER: "ExitCode",
    HOROVOD: "OnFailure",
}
#: Parameter servers of a job that sets none, by strategy.
DEFAULT_PS: Dict[str, int] = {PARAMETER_SERVER: 1}
#: Workers of a job that sets none: `mirrored` runs on one worker, the others on two.
DEFAULT_WORKERS: Dict[str, int] = {MIRRORED: 1}
DEFAULT_WORKER_COUNT = 2
SUCCESS_POLICIES: Tuple[str, ...] = ("", "AllWorkers")
#: How the input pipelines split the training files (see `input_pipeline`).
INPUT_SHARDINGS: Tuple[str, ...] = ("auto", "file", "record")

#: Where a cluster job's PVC (`pvc_name`) is mounted in the replicas.
PVC_MOUNT_PATH = "/mnt/kfdist"

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
      strategy: Distribution strategy name, one of `STRATEGIES`.
      input_sharding: How each worker's input pipeline takes its part of the
        training files: `file` (whole files; needs at least as many files as
        pipelines), `record` (every n-th record of every file) or `auto`
        (by file when there are enough files, else by record).
    """

    model_name: str
    epochs: int
    batch_size_per_replica: int
    learning_rate: float
    seed: int
    strategy: str
    input_sharding: str = "auto"

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
        require(self.strategy in STRATEGIES,
                f"unknown strategy {self.strategy!r}; valid strategies: {list(STRATEGIES)}")
        require(self.input_sharding in INPUT_SHARDINGS,
                f"input_sharding must be one of {list(INPUT_SHARDINGS)}, got {self.input_sharding!r}")


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """Where and how many replicas run, and what happens when one fails.

    Attributes:
      backend: `local` (processes on this machine), `tfjob` or `mpijob`.
      workers: Worker replicas. Without a chief, worker 0 leads.
      ps: Parameter servers (`parameter_server` only, at least 1 there).
      chief: Add a chief replica (`multi_worker_mirrored`); `parameter_server`
        always has one, its coordinator.
      evaluator: Add a side-car evaluator that evaluates every checkpoint on
        the eval split (not with `horovod`).
      slots_per_worker: MPI ranks per worker (`horovod`).
      restart_policy: What happens to a replica that exits non-zero, as the
        operators define it: `Never` (the job fails), `OnFailure` (restarted),
        `ExitCode` (restarted for exit codes 128-255, e.g. SIGKILL's 137 or
        a replica that lost a peer, 138; codes 1-127 fail the job).
      backoff_limit: Restarts allowed before the job fails (None: unlimited).
      active_deadline_seconds: The job fails once it has run this long (None: no deadline).
      success_policy: `""`: the job succeeds when the chief (worker 0 without
        one) succeeds and the rest are ended; `AllWorkers`: when every worker
        has; None: `default_success_policy` of the strategy.
    """

    backend: str
    workers: int
    ps: int = 0
    chief: bool = False
    evaluator: bool = False
    slots_per_worker: int = 1
    restart_policy: str = "ExitCode"
    backoff_limit: Optional[int] = 6
    active_deadline_seconds: Optional[float] = None
    success_policy: Optional[str] = None

    def validate(self, strategy: str) -> None:
        """Checks the backend, the replica counts, the policies and that they fit `strategy`.

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
        require(_is_int(self.ps) and self.ps >= 0, f"ps must be an integer >= 0, got {self.ps!r}")
        require(_is_int(self.slots_per_worker) and self.slots_per_worker >= 1,
                f"slots_per_worker must be an integer >= 1, got {self.slots_per_worker!r}")
        self._validate_shape(strategy)
        self._validate_policies(strategy)
        if self.backend == LOCAL_BACKEND:
            processes = sum(self.replica_counts(strategy).values()) * (
                self.slots_per_worker if strategy == HOROVOD else 1)
            require(processes <= MAX_LOCAL_WORKERS,
                    f"workers={self.workers} (ps={self.ps}, slots_per_worker={self.slots_per_worker})"
                    f" makes {processes} replica processes, too many for the local backend; "
                    f"use at most {MAX_LOCAL_WORKERS}")

    def _validate_shape(self, strategy: str) -> None:
        if strategy == PARAMETER_SERVER:
            require(self.ps >= 1, f"strategy parameter_server needs ps >= 1 parameter servers, "
                                  f"got ps={self.ps}")
        else:
            require(self.ps == 0,
                    f"ps={self.ps}: parameter servers are used only by strategy parameter_server, "
                    f"not {strategy!r} ({'horovod all-reduces over MPI' if strategy == HOROVOD else 'an all-reduce strategy'}); "
                    "set ps=0 or strategy=parameter_server")
        if strategy == MIRRORED:
            require(self.workers == 1 and not self.chief,
                    f"strategy mirrored runs on one worker's local devices, got workers={self.workers}"
                    f"{' and a chief' if self.chief else ''}; use multi_worker_mirrored for more")
        if strategy == HOROVOD:
            require(not self.chief, "strategy horovod has no chief (rank 0 leads): set chief=False")
            require(not self.evaluator,
                    "strategy horovod cannot run a side-car evaluator (an MPIJob has launcher and "
                    "workers only): set evaluator=False, or use multi_worker_mirrored or "
                    "parameter_server")
        else:
            require(self.slots_per_worker == 1,
                    f"slots_per_worker={self.slots_per_worker} is for strategy horovod only "
                    f"(MPI ranks per worker), not {strategy!r}")

    def _validate_policies(self, strategy: str) -> None:
        policies = MPI_RESTART_POLICIES if strategy == HOROVOD else RESTART_POLICIES
        require(self.restart_policy in policies,
                f"restart_policy must be one of {list(policies)} with strategy {strategy!r}, "
                f"got {self.restart_policy!r}")
        require(self.backoff_limit is None or (_is_int(self.backoff_limit) and self.backoff_limit >= 0),
                f"backoff_limit must be an integer >= 0 or None, got {self.backoff_limit!r}")
        require(self.active_deadline_seconds is None or (
            isinstance(self.active_deadline_seconds, (int, float))
            and not isinstance(self.active_deadline_seconds, bool)
            and math.isfinite(self.active_deadline_seconds) and self.active_deadline_seconds > 0),
            f"active_deadline_seconds must be a number > 0 or None, got {self.active_deadline_seconds!r}")
        require(self.success_policy is None or self.success_policy in SUCCESS_POLICIES,
                f"success_policy must be one of {list(SUCCESS_POLICIES)}, got {self.success_policy!r}")
        require(not (self.success_policy and strategy == HOROVOD),
                "success_policy applies to TensorFlow jobs; a horovod job ends with its launcher")
        require(not (self.success_policy == "AllWorkers" and strategy == PARAMETER_SERVER),
                "success_policy='AllWorkers' would never be met under parameter_server: its "
                "workers serve the chief until the job ends; leave success_policy unset")

    def effective_success_policy(self, strategy: str) -> str:
        """`success_policy`, or the strategy's default when it is None."""
        return default_success_policy(strategy) if self.success_policy is None else self.success_policy

    def has_chief(self, strategy: str) -> bool:
        """Whether the job has a chief replica (always under `parameter_server`)."""
        return self.chief or strategy == PARAMETER_SERVER

    def replica_counts(self, strategy: str) -> Dict[str, int]:
        """Replicas by lower-case TF_CONFIG type (`chief`, `worker`, `ps`, `evaluator`); no zeros."""
        counts = {"chief": 1 if self.has_chief(strategy) else 0, "worker": self.workers,
                  "ps": self.ps, "evaluator": 1 if self.evaluator else 0}
        return {t: n for t, n in counts.items() if n}

    def input_pipelines(self, strategy: str) -> int:
        """How many input pipelines split the training files: one per training process."""
        if strategy == HOROVOD:
            return self.workers * self.slots_per_worker
        if strategy == MULTI_WORKER_MIRRORED and self.chief:
            return self.workers + 1  # the chief trains too
        return self.workers


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
      state_uri: Cluster jobs: the shared location the leader publishes its
        training state to after every epoch (see `backup_sync`); None locally,
        where `model_dir` itself is shared.
    """

    dataset_dir: str
    model_dir: str
    work_dir: str
    training: TrainingConfig
    job: JobSpec
    dump_weights: bool = False
    state_uri: Optional[str] = None

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
                   dump_weights=bool(d.get("dump_weights", False)), state_uri=d.get("state_uri"))

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


def check_sharding(sharding: str, num_files: int, num_pipelines: int, split: str = "train") -> None:
    """Rejects forced file sharding that would leave a pipeline without files.

    Raises:
      InvalidInputError: Naming the counts and the ways out.
    """
    if sharding == "file" and num_files < num_pipelines:
        raise InvalidInputError(
            f"input_sharding='file' needs at least one {split!r} file per input pipeline, but "
            f"the split has {num_files} file(s) for {num_pipelines} pipelines (one per training "
            "process): re-shard with num_shards >= the number of training processes, or use "
            "input_sharding='auto' or 'record'")


def training_task_labels(strategy: str, spec: JobSpec) -> List[str]:
    """Labels of the replicas that run `fit` and write a `ReplicaReport`.

    `mirrored`: worker-0; `multi_worker_mirrored`: the chief (if any) and every
    worker; `parameter_server`: the chief (workers and PS serve its steps);
    `horovod`: every MPI rank, `rank-<r>`.
    """
    from kfdist.components.train_distributed.job.tf_config import CHIEF, WORKER, Task

    if strategy == HOROVOD:
        return [Task("rank", r).label for r in range(spec.workers * spec.slots_per_worker)]
    chief = [Task(CHIEF, 0).label]
    if strategy == PARAMETER_SERVER:
        return chief
    return (chief if spec.chief else []) + [Task(WORKER, i).label for i in range(spec.workers)]


def strategy_defaults(strategy: str, ps: Optional[int] = None,
                      restart_policy: Optional[str] = None,
                      workers: Optional[int] = None) -> Dict[str, object]:
    """`workers`, `ps` and `restart_policy`, each the strategy's default when unset.

    Args:
      strategy: A strategy name (an unknown one gets the TensorFlow defaults;
        it is rejected by validation).
      ps: Parameter servers; None or 0: `DEFAULT_PS` of the strategy (0 if none).
      restart_policy: None or empty: `DEFAULT_RESTART_POLICIES` of the strategy.
      workers: None: `DEFAULT_WORKERS` of the strategy, else `DEFAULT_WORKER_COUNT`.

    Returns:
      `{"workers": ..., "ps": ..., "restart_policy": ...}` for `JobSpec`.
    """
    if workers is None:
        workers = DEFAULT_WORKERS.get(strategy, DEFAULT_WORKER_COUNT)
    return {"workers": workers,
            "ps": ps or DEFAULT_PS.get(strategy, 0),
            "restart_policy": restart_policy or DEFAULT_RESTART_POLICIES.get(strategy, "ExitCode")}


def default_success_policy(strategy: str) -> str:
    """The success policy a training step uses when none is set.

    All-reduce workers each train and then write their report, so the job is
    done when all of them are (`AllWorkers`); under `parameter_server` the
    workers serve the chief's steps until they are ended, so the chief decides.
    """
    return "" if strategy in (PARAMETER_SERVER, HOROVOD) else "AllWorkers"


def replica_report_path(work_dir: str, task_label: str) -> str:
    """Where replica `task_label` (e.g. `worker-1`) writes its `ReplicaReport`."""
    return os.path.join(work_dir, f"replica-{task_label}.json")


def weights_dump_path(work_dir: str, task_label: str) -> str:
    """Where replica `task_label` dumps its final weights when `dump_weights` is set."""
    return os.path.join(work_dir, f"weights-{task_label}.npz")


def scratch_dir(work_dir: str, task_label: str) -> str:
    """A non-chief replica's scratch directory for saves that must not reach model_dir."""
    return os.path.join(work_dir, f"scratch-{task_label}")
