"""The distribution strategy of this replica and its role in the job.

The strategy is created first: collective ops must be configured before any
other TensorFlow work.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, Optional

import tensorflow as tf

from kfdist.components.train_distributed.job import config, tf_config
from kfdist.components.train_distributed.job import strategy_rules
from kfdist.components.train_distributed.replica.outputs import log


def _one_device() -> bool:
    """Whether this machine has a single device to train on (no or one GPU)."""
    return len(tf.config.list_logical_devices("GPU")) <= 1


def _mirrored(cluster: Optional[dict]) -> tf.distribute.Strategy:
    # Mirroring over one device only adds overhead (about 20 % of a small step).
    return tf.distribute.get_strategy() if _one_device() else tf.distribute.MirroredStrategy()


def _multi_worker_mirrored(cluster: Optional[dict]) -> tf.distribute.Strategy:
    # Without TF_CONFIG (a lone replica) this is MultiWorkerMirrored over the
    # local devices, or the default strategy when there is only one device:
    # the same numerics (nothing to all-reduce), without the collective's overhead.
    if cluster is None and _one_device():
        return tf.distribute.get_strategy()
    return tf.distribute.MultiWorkerMirroredStrategy()


def _parameter_server(cluster: Optional[dict]) -> tf.distribute.Strategy:
    # The evaluator is not part of the training cluster: the coordinator must not wait for it.
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(tf_config.training_cluster(cluster["cluster"])),
        task_type=tf_config.CHIEF, task_id=0, rpc_layer="grpc")
    return tf.distribute.ParameterServerStrategy(resolver)


def _horovod(cluster: Optional[dict]) -> tf.distribute.Strategy:
    return tf.distribute.get_strategy()  # Horovod all-reduces in its DistributedOptimizer


#: Strategy factories by `TrainingConfig.strategy`; each takes the parsed TF_CONFIG.
STRATEGY_FACTORIES: Dict[str, Callable[[Optional[dict]], tf.distribute.Strategy]] = {
    strategy_rules.MIRRORED: _mirrored,
    strategy_rules.MULTI_WORKER_MIRRORED: _multi_worker_mirrored,
    strategy_rules.PARAMETER_SERVER: _parameter_server,
    strategy_rules.HOROVOD: _horovod,
}


@dataclasses.dataclass
class Role:
    """How this replica takes part in training.

    Attributes:
      strategy: The `tf.distribute` strategy (the default one under Horovod).
      task: This replica (`rank-<r>` under Horovod).
      leader: Whether it writes the Model artifact and the run summary.
      replicas: Replicas whose batches make one step (the global batch is
        `batch_size_per_replica` times this).
      all_save: Whether every training replica must take part in saves
        (collective ops under MultiWorkerMirrored; non-leaders save to scratch).
      hvd: `horovod.tensorflow.keras` under Horovod, else None.
    """

    strategy: tf.distribute.Strategy
    task: tf_config.Task
    leader: bool
    replicas: int
    all_save: bool
    hvd: object = None


def make_role(training: config.TrainingConfig, cluster_config: Optional[dict]) -> Role:
    """Creates the strategy (first: collectives must be set up before other TF work)."""
    if training.strategy == strategy_rules.HOROVOD:
        from kfdist.components.train_distributed.replica import horovod_support

        hvd = horovod_support.horovod_keras()
        hvd.init()
        return Role(_horovod(None), tf_config.Task("rank", hvd.rank()), hvd.rank() == 0,
                    hvd.size(), all_save=False, hvd=hvd)
    strategy = STRATEGY_FACTORIES[training.strategy](cluster_config)
    task = tf_config.current_task(cluster_config)
    if training.strategy == strategy_rules.PARAMETER_SERVER:
        return Role(strategy, task, True, 1, all_save=False)
    return Role(strategy, task, tf_config.is_chief(cluster_config),
                strategy.num_replicas_in_sync, all_save=True)


def wait_for_all_workers(role: Role, training: config.TrainingConfig) -> None:
    """A barrier across the workers of a MultiWorkerMirrored job (a one-value all-reduce)."""
    if training.strategy != strategy_rules.MULTI_WORKER_MIRRORED or role.hvd is not None:
        return
    strategy = role.strategy

    @tf.function
    def _all_reduce():
        return strategy.reduce(tf.distribute.ReduceOp.SUM,
                               strategy.run(lambda: tf.constant(1.0)), axis=None)

    _all_reduce()


def serve_forever(cluster_config: dict, task: tf_config.Task) -> None:
    """Runs a `parameter_server` worker or PS: a TF server the chief drives, until ended."""
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
    server = tf.distribute.Server(tf.train.ClusterSpec(tf_config.training_cluster(cluster_config["cluster"])),
                                  job_name=task.type, task_index=task.index, protocol="grpc",
                                  start=True)
    log(f"replica {task.name} pid={os.getpid()} serving the chief's "
        f"{'variables' if task.type == tf_config.PS else 'steps'} at {server.target}")
    server.join()
