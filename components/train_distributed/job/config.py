"""Validated settings of a `train_distributed` job, shared by launcher and replicas.

Three frozen records describe a job:

* `TrainingConfig`: what to train and how (model, epochs, batch, optimiser,
  seed, distribution strategy); identical in every replica.
* `JobSpec`: where the replicas run (backend) and how many there are.
* `JobConfig`: both, plus the job's directories; the launcher writes it as
  JSON and every replica reads it (`replica --config JOB.json`).

Every check raises `InvalidInputError` naming the bad value and the valid
ones, before anything is launched. The strategies, backends and their rules
are in `strategy_rules`; the files replicas write, in `work_files`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Dict, Optional

from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.train_distributed.job import strategy_rules


# The training settings, in a module of their own (re-exported: `config.TrainingConfig`).
from kfdist.components.train_distributed.job.training_config import (  # noqa: E402,F401
    EARLY_STOPPING_MIN_DELTA, EARLY_STOPPING_PATIENCE, MAX_VALIDATION_FRACTION,
    STEPS_PER_EXECUTION, VALIDATION_FRACTION, TrainingConfig, is_whole_number)


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
        has; None: `strategy_rules.default_success_policy` of the strategy.
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
        require(self.backend in strategy_rules.STRATEGIES_BY_BACKEND,
                f"unknown backend {self.backend!r}; valid backends: {list(strategy_rules.BACKENDS)}")
        supported = strategy_rules.STRATEGIES_BY_BACKEND[self.backend]
        require(strategy in supported,
                f"strategy {strategy!r} is not supported by the {self.backend!r} backend; "
                f"valid strategies: {list(supported)}")
        require(is_whole_number(self.workers) and self.workers >= 1,
                f"workers must be an integer >= 1, got {self.workers!r}")
        require(is_whole_number(self.ps) and self.ps >= 0, f"ps must be an integer >= 0, got {self.ps!r}")
        require(is_whole_number(self.slots_per_worker) and self.slots_per_worker >= 1,
                f"slots_per_worker must be an integer >= 1, got {self.slots_per_worker!r}")
        self._validate_shape(strategy)
        self._validate_policies(strategy)
        if self.backend == strategy_rules.LOCAL_BACKEND:
            processes = sum(self.replica_counts(strategy).values()) * (
                self.slots_per_worker if strategy == strategy_rules.HOROVOD else 1)
            require(processes <= strategy_rules.MAX_LOCAL_WORKERS,
                    f"workers={self.workers} (ps={self.ps}, slots_per_worker={self.slots_per_worker})"
                    f" makes {processes} replica processes, too many for the local backend; "
                    f"use at most {strategy_rules.MAX_LOCAL_WORKERS}")

    def _validate_shape(self, strategy: str) -> None:
        if strategy == strategy_rules.PARAMETER_SERVER:
            require(self.ps >= 1, f"strategy parameter_server needs ps >= 1 parameter servers, "
                                  f"got ps={self.ps}")
        else:
            require(self.ps == 0,
                    f"ps={self.ps}: parameter servers are used only by strategy parameter_server, "
                    f"not {strategy!r} ({'horovod all-reduces over MPI' if strategy == strategy_rules.HOROVOD else 'an all-reduce strategy'}); "
                    "set ps=0 or strategy=parameter_server")
        if strategy == strategy_rules.MIRRORED:
            require(self.workers == 1 and not self.chief,
                    f"strategy mirrored runs on one worker's local devices, got workers={self.workers}"
                    f"{' and a chief' if self.chief else ''}; use multi_worker_mirrored for more")
        if strategy == strategy_rules.HOROVOD:
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
        policies = strategy_rules.MPI_RESTART_POLICIES if strategy == strategy_rules.HOROVOD else strategy_rules.RESTART_POLICIES
        require(self.restart_policy in policies,
                f"restart_policy must be one of {list(policies)} with strategy {strategy!r}, "
                f"got {self.restart_policy!r}")
        require(self.backoff_limit is None or (is_whole_number(self.backoff_limit) and self.backoff_limit >= 0),
                f"backoff_limit must be an integer >= 0 or None, got {self.backoff_limit!r}")
        require(self.active_deadline_seconds is None or (
            isinstance(self.active_deadline_seconds, (int, float))
            and not isinstance(self.active_deadline_seconds, bool)
            and math.isfinite(self.active_deadline_seconds) and self.active_deadline_seconds > 0),
            f"active_deadline_seconds must be a number > 0 or None, got {self.active_deadline_seconds!r}")
        require(self.success_policy is None or self.success_policy in strategy_rules.SUCCESS_POLICIES,
                f"success_policy must be one of {list(strategy_rules.SUCCESS_POLICIES)}, got {self.success_policy!r}")
        require(not (self.success_policy and strategy == strategy_rules.HOROVOD),
                "success_policy applies to TensorFlow jobs; a horovod job ends with its launcher")
        require(not (self.success_policy == "AllWorkers" and strategy == strategy_rules.PARAMETER_SERVER),
                "success_policy='AllWorkers' would never be met under parameter_server: its "
                "workers serve the chief until the job ends; leave success_policy unset")

    def effective_success_policy(self, strategy: str) -> str:
        """`success_policy`, or the strategy's default when it is None."""
        return strategy_rules.default_success_policy(strategy) if self.success_policy is None else self.success_policy

    def has_chief(self, strategy: str) -> bool:
        """Whether the job has a chief replica (always under `parameter_server`)."""
        return self.chief or strategy == strategy_rules.PARAMETER_SERVER

    def replica_counts(self, strategy: str) -> Dict[str, int]:
        """Replicas by lower-case TF_CONFIG type (`chief`, `worker`, `ps`, `evaluator`); no zeros."""
        counts = {"chief": 1 if self.has_chief(strategy) else 0, "worker": self.workers,
                  "ps": self.ps, "evaluator": 1 if self.evaluator else 0}
        return {t: n for t, n in counts.items() if n}

    def input_pipelines(self, strategy: str) -> int:
        """How many input pipelines split the training files: one per training process."""
        if strategy == strategy_rules.HOROVOD:
            return self.workers * self.slots_per_worker
        if strategy == strategy_rules.MULTI_WORKER_MIRRORED and self.chief:
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


