"""The typed description of a user-program job: framework, layout, command and locations.

One frozen `ProgramJob` says what `kfdist launch` runs; the environment of
each replica (`operator_env`) and the local runner (`local_launch`) are pure
consequences of it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Mapping, Optional, Tuple

from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed.job import strategy_rules

TENSORFLOW = "tensorflow"
PYTORCH = "pytorch"
FRAMEWORKS = (TENSORFLOW, PYTORCH)
#: The restart policies the MPI Operator accepts for a launcher (a batch Job's pod).
MPI_RESTART_POLICIES = ("Never", "OnFailure")
#: The most replica processes a local job starts on one machine.
MAX_LOCAL_REPLICAS = 16


@dataclasses.dataclass(frozen=True)
class ProgramJob:
    """A user's program run as a distributed job.

    Attributes:
      framework: `tensorflow` (replicas get TF_CONFIG) or `pytorch` (replicas
        get MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and PET_*).
      command: The program and its arguments, run unchanged in every replica.
      workers: TensorFlow: worker replicas. PyTorch: nodes (a master and
        `workers - 1` workers, as a PyTorchJob names them).
      ps: TensorFlow parameter servers.
      chief: TensorFlow: add a chief replica.
      evaluator: TensorFlow: add an evaluator replica.
      procs_per_worker: PyTorch: processes per node (`PET_NPROC_PER_NODE`).
      model_dir: Where the leader writes the model (`KFDIST_MODEL_DIR`).
      checkpoint_dir: Shared by every replica, kept across restarts (`KFDIST_CHECKPOINT_DIR`).
      data_dir: The dataset (`KFDIST_DATA_DIR`); None: the program has none.
      restart_policy: `Never`, `OnFailure` or `ExitCode`, as the operators define them.
      backoff_limit: Restarts allowed before the job fails (None: unlimited).
      active_deadline_seconds: The job fails once it ran this long (None: no deadline).
      mpi: An MPI program (Horovod): `mpirun`, as an MPIJob's launcher runs it, starts
        `workers x procs_per_worker` ranks, with neither TF_CONFIG nor the PyTorch variables.
      env: Variables set in every replica beside the operator's (`--env NAME=VALUE`, checked
        by `user_env.parse_env_flags`).
    """

    framework: str
    command: Tuple[str, ...]
    workers: int = 2
    ps: int = 0
    chief: bool = False
    evaluator: bool = False
    procs_per_worker: int = 1
    model_dir: str = "model"
    checkpoint_dir: str = "checkpoints"
    data_dir: Optional[str] = None
    restart_policy: str = "ExitCode"
    backoff_limit: Optional[int] = 6
    active_deadline_seconds: Optional[float] = None
    mpi: bool = False
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def validate(self) -> None:
        """Checks every field before anything starts.

        Raises:
          InvalidInputError: Naming the first bad value and what would be valid.
        """
        _require(self.framework in FRAMEWORKS,
                 f"unknown framework {self.framework!r}; valid: {list(FRAMEWORKS)}")
        _require(bool(self.command), "no command: put the program after `--`, e.g. "
                 "`kfdist launch ... -- python train.py`")
        _require(self.workers >= 1, f"workers must be >= 1, got {self.workers}")
        _require(self.ps >= 0, f"ps must be >= 0, got {self.ps}")
        _require(self.procs_per_worker >= 1,
                 f"procs_per_worker must be >= 1, got {self.procs_per_worker}")
        if self.mpi:
            _require(not (self.ps or self.chief or self.evaluator),
                     "an MPI program's replicas are ranks: use --workers and --procs-per-worker "
                     "(ranks per worker), not --ps, --chief or --evaluator")
            _require(self.restart_policy in MPI_RESTART_POLICIES,
                     f"restart policy {self.restart_policy!r} is not one an MPIJob's launcher "
                     f"takes; valid: {list(MPI_RESTART_POLICIES)}")
        elif self.framework == PYTORCH:
            _require(not (self.ps or self.chief or self.evaluator),
                     "--ps, --chief and --evaluator are TensorFlow replica types; a PyTorch job "
                     "has a master and workers: use --workers and --procs-per-worker")
        else:
            _require(self.procs_per_worker == 1, "--procs-per-worker is for PyTorch; a "
                     "TensorFlow job runs one process per replica")
        _require(self.restart_policy in strategy_rules.RESTART_POLICIES,
                 f"unknown restart policy {self.restart_policy!r}; "
                 f"valid: {list(strategy_rules.RESTART_POLICIES)}")
        _require(self.backoff_limit is None or self.backoff_limit >= 0,
                 f"backoff_limit must be >= 0, got {self.backoff_limit}")

    @property
    def replica_count(self) -> int:
        """Replica processes of the job (nodes for PyTorch)."""
        return self.workers + self.ps + int(self.chief) + int(self.evaluator)


def check_local_command(command: Tuple[str, ...]) -> None:
    """Refuses a program that cannot start on this machine, naming it.

    Raises:
      InvalidInputError: If `command[0]` is neither an executable file nor on PATH.
    """
    program = command[0]
    if os.sep in program:
        _require(os.path.isfile(program) and os.access(program, os.X_OK),
                 f"command {program!r} is not an executable file")
    else:
        _require(shutil.which(program) is not None,
                 f"command {program!r} was not found on PATH")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidInputError(message)
