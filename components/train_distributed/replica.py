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
from kfdist.components.train_distributed import config, input_pipeline, models, tf_config

CHECKPOINT_DIR = "checkpoints"


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


def _multi_worker_mirrored() -> tf.distribute.Strategy:
    # Without TF_CONFIG (a lone replica) this is MultiWorkerMirrored over the
    # local devices: one code path and the same numerics for 1 and N workers.
    return tf.distribute.MultiWorkerMirroredStrategy()


#: Strategy factories by `TrainingConfig.strategy`.
STRATEGY_FACTORIES: Dict[str, Callable[[], tf.distribute.Strategy]] = {
    config.MULTI_WORKER_MIRRORED: _multi_worker_mirrored,
}


def exit_when_launcher_dies(launcher_pid: Optional[int]) -> None:
    """Starts a daemon thread that ends this process once its launcher has gone."""
    if not launcher_pid:
        return

    def watch() -> None:
        while os.getppid() == launcher_pid:
            time.sleep(1.0)
        os._exit(3)

    threading.Thread(target=watch, name="launcher-watchdog", daemon=True).start()


class EpochLogger(tf.keras.callbacks.Callback):
    """Logs one line per epoch: loss, accuracy and global examples per second."""

    def __init__(self, epochs: int, examples_per_epoch: int, enabled: bool):
        super().__init__()
        self._epochs = epochs
        self._examples_per_epoch = examples_per_epoch
        self._enabled = enabled
        self._start = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if not self._enabled:
            return
        seconds = time.perf_counter() - self._start
        metrics = " ".join(f"{k}={v:.4f}" for k, v in sorted((logs or {}).items()))
        log(f"epoch {epoch + 1}/{self._epochs}: {metrics} "
            f"examples/s={self._examples_per_epoch / seconds:.0f} ({seconds:.1f}s)")


def weights_sha256(weights: Sequence[np.ndarray]) -> str:
    """SHA-256 over the weights as float32 bytes, in model order."""
    digest = hashlib.sha256()
    for w in weights:
        digest.update(np.ascontiguousarray(w, dtype=np.float32).tobytes())
    return digest.hexdigest()


def _write_json(path: str, value: dict) -> None:
    with open(path, "w") as f:
        json.dump(value, f, indent=2, sort_keys=True)


def _history_json(history: Dict[str, List[float]]) -> dict:
    epochs = len(next(iter(history.values()), []))
    return {"epochs": [{"epoch": e + 1, **{k: float(v[e]) for k, v in history.items()}}
                       for e in range(epochs)]}


def save_model(model: tf.keras.Model, job: config.JobConfig, task: tf_config.Task,
               chief: bool) -> None:
    """Saves the SavedModel; every replica must call it (collectives), only the chief keeps it."""
    if chief:
        model.save(os.path.join(job.model_dir, model_artifact.SAVED_MODEL_DIR), save_format="tf")
        return
    scratch = config.scratch_dir(job.work_dir, task.label)
    model.save(os.path.join(scratch, model_artifact.SAVED_MODEL_DIR), save_format="tf")
    shutil.rmtree(scratch, ignore_errors=True)


def train_replica(job: config.JobConfig) -> model_artifact.ReplicaReport:
    """Trains this replica's part of the job and writes its outputs."""
    training = job.training
    skip_autograph_for_tf_keras()
    tf.keras.utils.set_random_seed(training.seed)
    strategy = STRATEGY_FACTORIES[training.strategy]()
    cluster_config = tf_config.parse_env(os.environ)
    task, chief = tf_config.current_task(cluster_config), tf_config.is_chief(cluster_config)
    replicas = strategy.num_replicas_in_sync
    cluster = ("none (no TF_CONFIG)" if cluster_config is None else
               ", ".join(f"{len(a)} {t}" for t, a in cluster_config["cluster"].items()))
    log(f"replica {task.name} pid={os.getpid()} chief={chief} cluster: {cluster}; "
        f"strategy={training.strategy} num_replicas_in_sync={replicas}")

    meta = dataset_spec.load_metadata(job.dataset_dir)
    global_batch = training.batch_size_per_replica * replicas
    steps = input_pipeline.steps_per_epoch(meta, global_batch)
    dataset = strategy.distribute_datasets_from_function(input_pipeline.make_input_fn(
        meta, job.dataset_dir, batch_size_per_replica=training.batch_size_per_replica,
        seed=training.seed, log=log))
    with strategy.scope():
        model = models.build_model(training.model_name, meta)
        models.compile_model(model, training.learning_rate)

    checkpoint = tf.keras.callbacks.ModelCheckpoint(
        os.path.join(job.model_dir, CHECKPOINT_DIR, "ckpt"), save_weights_only=True)
    examples_per_epoch = steps * global_batch
    log(f"training {training.model_name}: {training.epochs} epoch(s) x {steps} steps, "
        f"global batch {global_batch}")
    start = time.perf_counter()
    history = model.fit(dataset, epochs=training.epochs, steps_per_epoch=steps, verbose=0,
                        callbacks=[EpochLogger(training.epochs, examples_per_epoch, chief),
                                   checkpoint])
    wall = time.perf_counter() - start

    save_model(model, job, task, chief)
    weights = model.get_weights()
    report = model_artifact.ReplicaReport(task=task.name, pid=os.getpid(),
                                          num_replicas_in_sync=replicas,
                                          weights_sha256=weights_sha256(weights))
    if job.dump_weights:
        np.savez(config.weights_dump_path(job.work_dir, task.label),
                 *[np.asarray(w) for w in weights])
    if chief:
        _write_chief_outputs(job, history.history, examples_per_epoch * training.epochs / wall, wall)
    _write_json(config.replica_report_path(job.work_dir, task.label), dataclasses.asdict(report))
    log(f"replica {task.name} done: weights sha256 {report.weights_sha256[:16]}...")
    return report


def _write_chief_outputs(job: config.JobConfig, history: Dict[str, List[float]],
                         examples_per_second: float, wall_seconds: float) -> None:
    shutil.copyfile(os.path.join(job.dataset_dir, dataset_spec.METADATA_FILE),
                    os.path.join(job.model_dir, model_artifact.DATASET_METADATA_FILE))
    _write_json(os.path.join(job.model_dir, model_artifact.HISTORY_FILE), _history_json(history))
    _write_json(os.path.join(job.work_dir, config.CHIEF_SUMMARY_FILE), {
        "epochs": len(history.get("loss", [])),
        "final_loss": float(history["loss"][-1]),
        "final_accuracy": float(history["accuracy"][-1]),
        "examples_per_second": examples_per_second,
        "wall_seconds": wall_seconds,
    })


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs one replica; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="JobConfig JSON written by the launcher")
    args = parser.parse_args(argv)
    launcher = os.environ.get(config.LAUNCHER_PID_ENV)
    exit_when_launcher_dies(int(launcher) if launcher else None)
    try:
        train_replica(config.JobConfig.read(args.config))
    except Exception as e:  # noqa: BLE001 -- reported to the launcher through the log and exit code
        traceback.print_exc()
        task = tf_config.current_task(tf_config.parse_env(os.environ))
        log(f"replica {task.name} failed: {type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
