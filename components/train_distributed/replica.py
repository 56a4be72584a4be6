"""The program every training replica runs.

    python -u -m kfdist.components.train_distributed.replica --config JOB.json

The replica finds its role in TF_CONFIG (none: a lone replica), creates the
distribution strategy first (collective ops must be configured before any
other TensorFlow work), builds the input pipeline and the model under the
strategy, and trains with tf-keras `fit`.

Outputs: the chief writes the Model artifact's `saved_model/`,
`dataset_metadata.json`, `history.json` and `checkpoints/` into model_dir and
a run summary into the job's work_dir; every replica writes its
`ReplicaReport` into the work_dir. Non-chief replicas take part in every save
(they hold collective ops) but save into their scratch directory, deleted
afterwards. Exit code 0 means the replica finished; anything else is a failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import threading
import time
import traceback
from typing import Callable, Dict, List, Optional, Sequence

import kfdist  # noqa: F401  (selects legacy Keras before TensorFlow loads)
import numpy as np
import tensorflow as tf

from kfdist.components.common import dataset_spec, model_artifact
from kfdist.components.train_distributed import (config, input_pipeline, input_wait, models,
                                                tf_config)
from kfdist.components.train_distributed.epoch_line import format_epoch_line



def skip_autograph_for_tf_keras() -> None:
    """Stops AutoGraph from converting tf-keras's own code (the first `fit` drops from ~15 s to ~1 s).

    TensorFlow's AutoGraph rules exempt the `keras` package but not its
    legacy fork `tf_keras`, so every first `fit` re-transpiles hundreds of
    tf-keras functions written to run without AutoGraph. Model code outside
    tf_keras (user models) is still converted. A no-op if TensorFlow's
    (private) rule table ever moves.
    """
    try:
        from tensorflow.python.autograph.core import config as autograph_config
    except ImportError:
        return
    rules = tuple(getattr(autograph_config, "CONVERSION_RULES", ()))
    autograph_config.CONVERSION_RULES = (autograph_config.DoNotConvert("tf_keras"),) + rules


def log(line: str) -> None:
    """Writes one line to stdout, which the launcher streams into the step's log."""
    print(line, flush=True)


#: Exit code of a replica whose peer went away (collectives aborted): retryable under the
#: `ExitCode` restart policy (128-255), so the operator, or the local backend, restarts it
#: and the re-formed cluster resumes from the last backup.
PEER_LOST_EXIT_CODE = 138
#: Errors a replica gets when another replica of its cluster died or restarted.
PEER_LOST_ERRORS = (tf.errors.UnavailableError, tf.errors.AbortedError,
                    tf.errors.DeadlineExceededError)


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
    config.MIRRORED: _mirrored,
    config.MULTI_WORKER_MIRRORED: _multi_worker_mirrored,
    config.PARAMETER_SERVER: _parameter_server,
    config.HOROVOD: _horovod,
}


def exit_when_launcher_dies(launcher_pid: Optional[int]) -> None:
    """Starts a daemon thread that ends this process once its parent has gone.

    The parent is the local backend (`launcher_pid`) or, under Horovod, the
    `mpirun` daemon the local backend started; either way, when it dies the
    replica is re-parented and exits.
    """
    if not launcher_pid:
        return
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(3)

    threading.Thread(target=watch, name="launcher-watchdog", daemon=True).start()


class EpochLogger(tf.keras.callbacks.Callback):
    """Logs one line per epoch (loss, accuracy, global examples per second) and a resume."""

    def __init__(self, epochs: int, examples_per_epoch: int, enabled: bool):
        super().__init__()
        self._epochs = epochs
        self._examples_per_epoch = examples_per_epoch
        self._enabled = enabled
        self._start = 0.0
        self._first = True

    def on_epoch_begin(self, epoch, logs=None):
        if self._first and epoch > 0 and self._enabled:
            log(f"resuming from the backup: epochs 1-{epoch} are done, starting epoch {epoch + 1}")
        self._first = False
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if not self._enabled:
            return
        seconds = time.perf_counter() - self._start
        log(format_epoch_line(epoch + 1, self._epochs, logs or {},
                              self._examples_per_epoch / seconds, seconds))


class HistoryWriter(tf.keras.callbacks.Callback):
    """Keeps `history.json` current after every epoch, across restarts of the job.

    A resumed run starts a new `fit`, whose History holds only the epochs it
    ran; the epochs done before the interruption come from the file.
    """

    def __init__(self, path: str, enabled: bool):
        super().__init__()
        self._path = path
        self._enabled = enabled
        self._started = 0.0
        self.epochs: List[dict] = []

    def on_epoch_begin(self, epoch, logs=None):
        if not self.epochs and self._enabled and os.path.isfile(self._path):
            with open(self._path) as f:
                self.epochs = [e for e in json.load(f)["epochs"] if e["epoch"] <= epoch]
        self._started = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.epochs = [e for e in self.epochs if e["epoch"] != epoch + 1]
        self.epochs.append({"epoch": epoch + 1, **{k: float(v) for k, v in (logs or {}).items()},
                            model_artifact.EPOCH_SECONDS: time.perf_counter() - self._started})
        if self._enabled:
            _write_json(self._path, {"epochs": self.epochs})


def weights_sha256(weights: Sequence[np.ndarray]) -> str:
    """SHA-256 over the weights as float32 bytes, in model order."""
    digest = hashlib.sha256()
    for w in weights:
        digest.update(np.ascontiguousarray(w, dtype=np.float32).tobytes())
    return digest.hexdigest()


def _write_json(path: str, value: dict) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=2, sort_keys=True)
    os.replace(tmp, path)


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
    if training.strategy == config.HOROVOD:
        from kfdist.components.train_distributed import horovod_support

        hvd = horovod_support.horovod_keras()
        hvd.init()
        return Role(_horovod(None), tf_config.Task("rank", hvd.rank()), hvd.rank() == 0,
                    hvd.size(), all_save=False, hvd=hvd)
    strategy = STRATEGY_FACTORIES[training.strategy](cluster_config)
    task = tf_config.current_task(cluster_config)
    if training.strategy == config.PARAMETER_SERVER:
        return Role(strategy, task, True, 1, all_save=False)
    return Role(strategy, task, tf_config.is_chief(cluster_config),
                strategy.num_replicas_in_sync, all_save=True)


def _wait_for_all_workers(role: Role, training: config.TrainingConfig) -> None:
    """A barrier across the workers of a MultiWorkerMirrored job (a one-value all-reduce)."""
    if training.strategy != config.MULTI_WORKER_MIRRORED or role.hvd is not None:
        return
    strategy = role.strategy

    @tf.function
    def _all_reduce():
        return strategy.reduce(tf.distribute.ReduceOp.SUM,
                               strategy.run(lambda: tf.constant(1.0)), axis=None)

    _all_reduce()


def save_model(model: tf.keras.Model, job: config.JobConfig, role: Role) -> None:
    """Saves the SavedModel: the leader into model_dir; under MultiWorkerMirrored every
    replica must call it (collectives), the others into a scratch directory deleted after."""
    if role.leader:
        # Horovod's optimizer holds Horovod ops, which a process without Horovod cannot load.
        model.save(os.path.join(job.model_dir, model_artifact.SAVED_MODEL_DIR), save_format="tf",
                   include_optimizer=role.hvd is None)
        return
    if not role.all_save:
        return
    scratch = config.scratch_dir(job.work_dir, role.task.label)
    model.save(os.path.join(scratch, model_artifact.SAVED_MODEL_DIR), save_format="tf")
    shutil.rmtree(scratch, ignore_errors=True)


def _input(job: config.JobConfig, role: Role, meta, meter) -> object:
    training = job.training
    input_fn = input_pipeline.make_input_fn(
        meta, job.dataset_dir, batch_size_per_replica=training.batch_size_per_replica,
        seed=training.seed, sharding=training.input_sharding, log=log if role.leader else None,
        wait_meter=meter, per_worker_order=training.strategy == config.PARAMETER_SERVER)
    if role.hvd is not None:
        return input_fn(tf.distribute.InputContext(role.replicas, role.hvd.rank(), role.replicas))
    if training.strategy == config.PARAMETER_SERVER:
        return tf.keras.utils.experimental.DatasetCreator(input_fn)
    return role.strategy.distribute_datasets_from_function(input_fn)


def _resume_epoch(role: Role, backup_dir: str) -> int:
    """Under Horovod: the epoch rank 0's backup resumes from, agreed by every rank."""
    epoch = 0
    if role.leader:
        path = os.path.join(backup_dir, EPOCHS_DONE_FILE)
        if os.path.isfile(path):
            with open(path) as f:
                epoch = int(json.load(f)["epochs_done"])
    import horovod.tensorflow as hvd_tf  # bound to tf-keras already (horovod_support)

    return int(hvd_tf.broadcast_object(epoch, root_rank=0, name="kfdist_resume_epoch"))


EPOCHS_DONE_FILE = "kfdist-epochs-done.json"


class _EpochsDone(tf.keras.callbacks.Callback):
    """Records next to Horovod rank 0's backup how many epochs it holds."""

    def __init__(self, backup_dir: str):
        super().__init__()
        self._path = os.path.join(backup_dir, EPOCHS_DONE_FILE)

    def on_epoch_end(self, epoch, logs=None):
        if os.path.isdir(os.path.dirname(self._path)):
            _write_json(self._path, {"epochs_done": epoch + 1})


def _callbacks(job: config.JobConfig, role: Role, meter, steps: int, global_batch: int):
    training = job.training
    backup_dir = os.path.join(job.model_dir, model_artifact.BACKUP_DIR)
    checkpoint = tf.keras.callbacks.ModelCheckpoint(
        os.path.join(job.model_dir, model_artifact.CHECKPOINTS_DIR, model_artifact.CHECKPOINT_PREFIX),
        save_weights_only=True)
    history = HistoryWriter(os.path.join(job.model_dir, model_artifact.HISTORY_FILE), role.leader)
    callbacks: List[tf.keras.callbacks.Callback] = []
    if role.hvd is not None:
        # Broadcast first (identical start), average metrics before anything reads them.
        callbacks += [role.hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                      role.hvd.callbacks.MetricAverageCallback()]
        if role.leader:
            callbacks += [tf.keras.callbacks.BackupAndRestore(backup_dir), _EpochsDone(backup_dir),
                          checkpoint]
    else:
        callbacks += [tf.keras.callbacks.BackupAndRestore(backup_dir), checkpoint]
    if meter is not None:
        callbacks.append(meter)
    # The history first: its epoch time is the steps' time, before the backups are written.
    callbacks = [history] + callbacks + [EpochLogger(training.epochs, steps * global_batch,
                                                     role.leader)]
    if job.state_uri and role.leader:
        from kfdist.components.train_distributed import backup_sync

        callbacks.append(backup_sync.PublishEachEpoch(job.model_dir, job.state_uri))
    return callbacks, history, backup_dir


@dataclasses.dataclass(frozen=True)
class ReplicaOutcome:
    """What a training replica did.

    Attributes:
      report: Its `ReplicaReport` (also written to the job's work_dir).
      leader: Whether it wrote the Model artifact (the chief, or Horovod rank 0).
    """

    report: model_artifact.ReplicaReport
    leader: bool


def train_replica(job: config.JobConfig) -> Optional[ReplicaOutcome]:
    """Plays this replica's part in the job and writes its outputs.

    Parameter servers and `parameter_server` workers serve until the job
    ends them; the evaluator evaluates checkpoints until then; every other
    replica trains with `fit`.

    Returns:
      The outcome of a training replica; None for a server or the evaluator.
    """
    training = job.training
    skip_autograph_for_tf_keras()
    tf.keras.utils.set_random_seed(training.seed)
    cluster_config = tf_config.parse_env(os.environ)
    task = tf_config.current_task(cluster_config)
    if task.type == tf_config.EVALUATOR:
        from kfdist.components.train_distributed import sidecar_evaluator

        sidecar_evaluator.run(job, log)
        return None
    if training.strategy == config.PARAMETER_SERVER and task.type in (tf_config.WORKER, tf_config.PS):
        serve_forever(cluster_config, task)
        return None
    role = make_role(training, cluster_config)
    cluster = ("none (no TF_CONFIG)" if cluster_config is None else
               ", ".join(f"{len(a)} {t}" for t, a in cluster_config["cluster"].items()))
    if role.hvd is not None:
        cluster = f"{role.replicas} MPI rank(s)"
    log(f"replica {role.task.name} pid={os.getpid()} leader={role.leader} cluster: {cluster}; "
        f"strategy={training.strategy} replicas_in_sync={role.replicas}")

    meta = dataset_spec.load_metadata(job.dataset_dir)
    global_batch = training.batch_size_per_replica * role.replicas
    steps = input_pipeline.steps_per_epoch(meta, global_batch)
    meter = None if training.strategy == config.PARAMETER_SERVER else input_wait.InputWaitMeter()
    dataset = _input(job, role, meta, meter)
    learning_rate = training.learning_rate
    with role.strategy.scope():
        model = models.build_model(training.model_name, meta)
        if role.hvd is not None:
            learning_rate *= role.replicas  # the global batch is `replicas` times larger
        models.compile_model(model, learning_rate,
                             wrap_optimizer=role.hvd.DistributedOptimizer if role.hvd else None)
        if role.hvd is not None:
            # Horovod's broadcast pairs variables across ranks by name. Built lazily (tf-keras
            # 2.21), the optimizer's slots are named `Adam/m/...` on rank 0, which also runs
            # BackupAndRestore, and `m/...` on the others: the first broadcast waits forever.
            model.optimizer.build(model.trainable_variables)
    callbacks, history_writer, backup_dir = _callbacks(job, role, meter, steps, global_batch)
    initial_epoch = _resume_epoch(role, backup_dir) if role.hvd is not None else 0
    log_lr = f", learning rate {learning_rate:g}" if learning_rate != training.learning_rate else ""
    if role.leader:
        log(f"training {training.model_name}: {training.epochs} epoch(s) x {steps} steps, "
            f"global batch {global_batch}{log_lr}")
    start = time.perf_counter()
    history = model.fit(dataset, epochs=training.epochs, steps_per_epoch=steps, verbose=0,
                        initial_epoch=initial_epoch, callbacks=callbacks)
    wall = time.perf_counter() - start
    initial_epoch = history.epoch[0] if history.epoch else training.epochs
    # Training is complete: nothing is left to resume. The other workers remove their own
    # backup scratch (`workertemp_N`) as their last epoch ends; the leader removes the rest
    # only once every worker is past that point.
    _wait_for_all_workers(role, training)
    if role.leader:
        shutil.rmtree(backup_dir, ignore_errors=True)

    save_model(model, job, role)
    weights = model.get_weights()
    report = model_artifact.ReplicaReport(
        task=role.task.name, pid=os.getpid(), num_replicas_in_sync=role.replicas,
        weights_sha256=weights_sha256(weights),
        variable_devices=[str(v.device) for v in model.trainable_variables])
    if job.dump_weights:
        np.savez(config.weights_dump_path(job.work_dir, role.task.label),
                 *[np.asarray(w) for w in weights])
    if role.leader:
        epochs_run = training.epochs - initial_epoch
        _write_chief_outputs(job, history_writer.epochs,
                             steps * global_batch * epochs_run / wall if epochs_run else 0.0, wall,
                             meter.fraction if meter is not None else None, initial_epoch)
    _write_json(config.replica_report_path(job.work_dir, role.task.label), dataclasses.asdict(report))
    log(f"replica {role.task.name} done: weights sha256 {report.weights_sha256[:16]}...")
    return ReplicaOutcome(report, role.leader)


def serve_forever(cluster_config: dict, task: tf_config.Task) -> None:
    """Runs a `parameter_server` worker or PS: a TF server the chief drives, until ended."""
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
    server = tf.distribute.Server(tf.train.ClusterSpec(tf_config.training_cluster(cluster_config["cluster"])),
                                  job_name=task.type, task_index=task.index, protocol="grpc",
                                  start=True)
    log(f"replica {task.name} pid={os.getpid()} serving the chief's "
        f"{'variables' if task.type == tf_config.PS else 'steps'} at {server.target}")
    server.join()


def _write_chief_outputs(job: config.JobConfig, epochs: List[dict], examples_per_second: float,
                         wall_seconds: float, input_bound_fraction: Optional[float],
                         initial_epoch: int) -> None:
    shutil.copyfile(os.path.join(job.dataset_dir, dataset_spec.METADATA_FILE),
                    os.path.join(job.model_dir, model_artifact.DATASET_METADATA_FILE))
    _write_json(os.path.join(job.model_dir, model_artifact.HISTORY_FILE), {"epochs": epochs})
    last = epochs[-1] if epochs else {}
    _write_json(os.path.join(job.work_dir, config.CHIEF_SUMMARY_FILE), {
        "epochs": len(epochs),
        "final_loss": float(last.get("loss", float("nan"))),
        "final_accuracy": float(last.get("accuracy", float("nan"))),
        "examples_per_second": examples_per_second,
        "wall_seconds": wall_seconds,
        "input_bound_fraction": input_bound_fraction,
        "initial_epoch": initial_epoch,
    })
    if input_bound_fraction is not None:
        log(f"input-bound fraction: {input_bound_fraction:.1%} of step time waited for input")


def _task_of_this_process() -> tf_config.Task:
    rank = os.environ.get("OMPI_COMM_WORLD_RANK")  # set by OpenMPI's mpirun for every rank
    if rank is not None:
        return tf_config.Task("rank", int(rank))
    return tf_config.current_task(tf_config.parse_env(os.environ))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs one replica; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="JobConfig JSON written by the launcher")
    args = parser.parse_args(argv)
    launcher = os.environ.get(config.LAUNCHER_PID_ENV)
    exit_when_launcher_dies(int(launcher) if launcher else None)
    try:
        train_replica(config.JobConfig.read(args.config))
    except PEER_LOST_ERRORS as e:
        task = _task_of_this_process()
        log(f"replica {task.name} lost a peer ({type(e).__name__}: {str(e).splitlines()[0]}); "
            f"exiting with {PEER_LOST_EXIT_CODE} to be restarted")
        return PEER_LOST_EXIT_CODE
    except Exception as e:  # noqa: BLE001 -- reported to the launcher through the log and exit code
        traceback.print_exc()
        task = _task_of_this_process()
        log(f"replica {task.name} failed: {type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
