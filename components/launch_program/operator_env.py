"""The environment an operator injects into each replica of a program job (pure functions).

TensorFlow (TFJob): `TF_CONFIG` in the Training Operator's layout
(`train_distributed.job.tf_config`). PyTorch (PyTorchJob, Training Operator
v1.9 `pkg/controller.v1/pytorch/envvar.go`): every container gets
`PYTHONUNBUFFERED`, `MASTER_PORT`/`PET_MASTER_PORT`, `MASTER_ADDR`/
`PET_MASTER_ADDR` (the master's service), `WORLD_SIZE` (replicas times
processes per node), `RANK` (master 0, worker i is i + 1), `PET_NPROC_PER_NODE`,
`PET_NODE_RANK` (= RANK) and `PET_NNODES` (the replicas). kfdist adds
`KFDIST_MODEL_DIR`, `KFDIST_DATA_DIR` and `KFDIST_CHECKPOINT_DIR`, the same on
every backend.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from kfdist.components.launch_program.program_job import ProgramJob
from kfdist.components.train_distributed.job import tf_config
from kfdist.components.train_distributed.local.supervisor import MASTER

MODEL_DIR_ENV = "KFDIST_MODEL_DIR"
DATA_DIR_ENV = "KFDIST_DATA_DIR"
CHECKPOINT_DIR_ENV = "KFDIST_CHECKPOINT_DIR"
#: Every variable an operator or kfdist sets; a local replica inherits none of them from the shell.
INJECTED = (tf_config.TF_CONFIG_ENV, "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK",
            "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NPROC_PER_NODE", "PET_NODE_RANK",
            "PET_NNODES", MODEL_DIR_ENV, DATA_DIR_ENV, CHECKPOINT_DIR_ENV)


def kfdist_env(job: ProgramJob) -> Dict[str, str]:
    """`KFDIST_MODEL_DIR`, `KFDIST_CHECKPOINT_DIR` and (with a dataset) `KFDIST_DATA_DIR`."""
    env = {MODEL_DIR_ENV: job.model_dir, CHECKPOINT_DIR_ENV: job.checkpoint_dir}
    if job.data_dir is not None:
        env[DATA_DIR_ENV] = job.data_dir
    return env


def pytorch_tasks(job: ProgramJob) -> List[tf_config.Task]:
    """The PyTorchJob's replicas: `master-0`, then `worker-0` .. `worker-(workers-2)`."""
    return [tf_config.Task(MASTER, 0)] + [tf_config.Task(tf_config.WORKER, i)
                                          for i in range(job.workers - 1)]


def pytorch_env(job: ProgramJob, task: tf_config.Task, master_addr: str,
                master_port: int) -> Dict[str, str]:
    """What the Training Operator v1.9 sets in a PyTorchJob replica (with a master)."""
    rank = task.index + 1 if task.type == tf_config.WORKER else task.index
    return {"PYTHONUNBUFFERED": "1", "MASTER_PORT": str(master_port),
            "PET_MASTER_PORT": str(master_port), "MASTER_ADDR": master_addr,
            "PET_MASTER_ADDR": master_addr, "WORLD_SIZE": str(job.workers * job.procs_per_worker),
            "RANK": str(rank), "PET_NPROC_PER_NODE": str(job.procs_per_worker),
            "PET_NODE_RANK": str(rank), "PET_NNODES": str(job.workers)}


def tensorflow_cluster_counts(job: ProgramJob) -> Dict[str, int]:
    """Replicas by TensorFlow type, empty types left out."""
    counts = {tf_config.CHIEF: int(job.chief), tf_config.WORKER: job.workers,
              tf_config.PS: job.ps, tf_config.EVALUATOR: int(job.evaluator)}
    return {t: n for t, n in counts.items() if n}


def replica_envs(job: ProgramJob, addresses: List[str]) -> List[Tuple[tf_config.Task, Dict[str, str]]]:
    """`(task, injected variables)` for every replica, given one `host:port` per replica.

    Args:
      job: The validated job.
      addresses: `host:port` of each replica, in the order the replicas are listed
        (TensorFlow: chief, workers, ps, evaluator; PyTorch: master, workers).
    """
    extra = kfdist_env(job)
    if job.framework == "pytorch":
        host, port = addresses[0].rsplit(":", 1)
        return [(task, {**pytorch_env(job, task, host, int(port)), **extra})
                for task in pytorch_tasks(job)]
    free = iter(addresses)
    cluster = tf_config.build_cluster({t: [next(free) for _ in range(n)]
                                       for t, n in tensorflow_cluster_counts(job).items()})
    out = []
    for task, value in tf_config.tf_configs(cluster):
        env = dict(extra)
        if value is not None:
            env[tf_config.TF_CONFIG_ENV] = tf_config.to_env_value(value)
        out.append((task, env))
    return out
