"""The distribution strategies, the backends that run them, and the rules they follow.

Strategies and the replicas they use:

* `mirrored`: one worker, synchronous over all its local devices;
* `multi_worker_mirrored`: workers (optionally a chief), synchronous all-reduce;
* `parameter_server`: a chief (the coordinator, always present), `ps`
  parameter servers holding the variables, workers running steps asynchronously;
* `horovod`: `workers x slots_per_worker` MPI ranks, all-reduce over MPI.

An `evaluator` (side-car evaluation of each checkpoint) can join every
strategy but `horovod`. `replica.strategies` builds them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from kfdist.components.common.errors import InvalidInputError

if TYPE_CHECKING:
    from kfdist.components.train_distributed.job.config import JobSpec

MIRRORED = "mirrored"
MULTI_WORKER_MIRRORED = "multi_worker_mirrored"
PARAMETER_SERVER = "parameter_server"
HOROVOD = "horovod"
STRATEGIES: Tuple[str, ...] = (MIRRORED, MULTI_WORKER_MIRRORED, PARAMETER_SERVER, HOROVOD)
LOCAL_BACKEND = "local"
TFJOB_BACKEND = "tfjob"
MPIJOB_BACKEND = "mpijob"
TRAINJOB_BACKEND = "trainjob"

#: Strategies each backend can run, by backend name.
STRATEGIES_BY_BACKEND: Dict[str, Tuple[str, ...]] = {
    LOCAL_BACKEND: STRATEGIES,
    TFJOB_BACKEND: (MIRRORED, MULTI_WORKER_MIRRORED, PARAMETER_SERVER),
    MPIJOB_BACKEND: (HOROVOD,),
    TRAINJOB_BACKEND: (MIRRORED, MULTI_WORKER_MIRRORED, PARAMETER_SERVER, HOROVOD),
}
#: Not a backend: the step picks `trainjob`, `tfjob`/`mpijob` or `local` at run time
#: (`kubernetes.backend_choice`).
AUTO_BACKEND = "auto"
#: The backends that run the replicas on a Kubernetes cluster.
CLUSTER_BACKENDS: Tuple[str, ...] = (TFJOB_BACKEND, MPIJOB_BACKEND, TRAINJOB_BACKEND)
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


def batch_for_split(examples: int, batch_size_per_replica: int, num_pipelines: int) -> int:
    """The batch per replica that trains on a split of `examples`.

    The one asked for, unless the split holds fewer than one global batch of it
    (`batch_size_per_replica` x `num_pipelines`, one per training process): then the largest
    batch that still makes one full step, `examples // num_pipelines`, as Keras trains a
    dataset smaller than its batch as one partial batch.

    Raises:
      InvalidInputError: If the split has fewer examples than training processes.
    """
    if examples < num_pipelines:
        raise InvalidInputError(
            f"the train split has {examples} example(s), fewer than the job's {num_pipelines} "
            "training processes; workers must be fewer, as each process trains on one example "
            "at least")
    return min(batch_size_per_replica, examples // num_pipelines)


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
