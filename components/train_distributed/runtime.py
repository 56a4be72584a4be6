"""Entry point of `train_distributed`: validate, launch the replicas, assemble the report.

    report = train("/data/digits", "/out/model", workers=2)

The launcher itself never imports TensorFlow (a user model module may): the
replicas do all TensorFlow work. It validates every argument before anything
is created, writes the job's `JobConfig` into a job work directory, runs the
replicas on the chosen backend, then merges the replicas' reports into
`training_report.json` in the model directory (the chief has written the rest
of the Model artifact, see `model_artifact`).

With `workers == 1` the single replica gets no TF_CONFIG, as the Training
Operator does for a one-replica job, and runs MultiWorkerMirroredStrategy over
its local devices: the same code path as a multi-worker job.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Callable, Optional

from kfdist.components.common import dataset_spec, model_artifact
from kfdist.components.common.errors import TrainingFailedError, require
from kfdist.components.train_distributed import config, local_backend, models, tf_config
from kfdist.components.train_distributed.cluster_options import ClusterOptions

JOB_CONFIG_FILE = "job.json"


def validate_training_args(*, backend: str = "local", strategy: str = "multi_worker_mirrored",
                           workers: int = 2, model_name: str = "mnist_mlp", epochs: int = 5,
                           batch_size_per_replica: int = 64, learning_rate: float = 0.001,
                           seed: int = 42) -> None:
    """Checks the training arguments without a dataset (imports a user model's module).

    Raises:
      InvalidInputError: Naming the first invalid value and what would be valid.
    """
    _training_and_spec(backend, strategy, workers, model_name, epochs,
                       batch_size_per_replica, learning_rate, seed)


def _training_and_spec(backend, strategy, workers, model_name, epochs, batch_size_per_replica,
                       learning_rate, seed):
    training = config.TrainingConfig(model_name=model_name, epochs=epochs,
                                     batch_size_per_replica=batch_size_per_replica,
                                     learning_rate=learning_rate, seed=seed, strategy=strategy)
    spec = config.JobSpec(backend=backend, workers=workers)
    training.validate()
    spec.validate(strategy)
    models.resolve_model(model_name)
    return training, spec


def _check_dataset(dataset_dir: str, training: config.TrainingConfig,
                   spec: config.JobSpec) -> dataset_spec.DatasetMetadata:
    meta = dataset_spec.load_metadata(dataset_dir)
    models.check_compatible(training.model_name, meta)
    require("train" in meta.splits, f"dataset {dataset_dir!r} has no 'train' split")
    examples = meta.splits["train"].num_examples
    smallest_global_batch = training.batch_size_per_replica * spec.workers
    require(examples >= smallest_global_batch,
            f"the train split has {examples} examples, fewer than one global batch of "
            f"{training.batch_size_per_replica} x {spec.workers} workers; "
            "lower batch_size_per_replica or workers")
    for path in meta.shard_paths(dataset_dir, "train"):
        require(os.path.isfile(path), f"dataset {dataset_dir!r} lacks its train shard {path!r}")
    return meta


def _prepare_model_dir(model_dir: str) -> None:
    if os.path.isdir(model_dir):
        require(not os.listdir(model_dir),
                f"model_dir {model_dir!r} is not empty: {sorted(os.listdir(model_dir))[:5]}")
    require(not os.path.exists(model_dir) or os.path.isdir(model_dir),
            f"model_dir {model_dir!r} exists and is not a directory")
    os.makedirs(model_dir, exist_ok=True)


def _read_json(path: str, what: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise TrainingFailedError(f"training ended without {what} ({path} is missing)") from None


def assemble_report(job: config.JobConfig) -> model_artifact.TrainingReport:
    """Merges the chief's summary and every replica's report from the job's work_dir.

    Raises:
      TrainingFailedError: If a report is missing.
    """
    cluster = tf_config.worker_cluster(["-"] * job.job.workers)
    replicas = [model_artifact.ReplicaReport(**_read_json(
        config.replica_report_path(job.work_dir, task.label), f"the report of {task.label}"))
        for task in tf_config.cluster_tasks(cluster)]
    summary = _read_json(os.path.join(job.work_dir, config.CHIEF_SUMMARY_FILE), "the chief's summary")
    return model_artifact.TrainingReport(
        backend=job.job.backend, strategy=job.training.strategy, workers=job.job.workers,
        model_name=job.training.model_name, epochs=int(summary["epochs"]),
        final_loss=float(summary["final_loss"]), final_accuracy=float(summary["final_accuracy"]),
        examples_per_second=float(summary["examples_per_second"]),
        wall_seconds=float(summary["wall_seconds"]), replicas=replicas)


def train(dataset_dir: str, model_dir: str, *, backend: str = "local",
          strategy: str = "multi_worker_mirrored", workers: int = 2, model_name: str = "mnist_mlp",
          epochs: int = 5, batch_size_per_replica: int = 64, learning_rate: float = 0.001,
          seed: int = 42, log: Callable[[str], None] = print,
          debug_dir: Optional[str] = None, cluster: Optional[ClusterOptions] = None,
          dataset_uri: Optional[str] = None) -> model_artifact.TrainingReport:
    """Trains `model_name` on a kfdist dataset with `workers` replicas; writes the Model artifact.

    Args:
      dataset_dir: Local kfdist dataset directory (`metadata.json` + shards).
      model_dir: Local directory, missing or empty, for the Model artifact.
      backend: Where replicas run: `local` (processes on this machine).
      strategy: Distribution strategy: `multi_worker_mirrored`.
      workers: Worker replicas; worker 0 is the chief.
      model_name: `mnist_mlp`, `mnist_cnn` or `package.module:function`.
      epochs: Passes over the train split.
      batch_size_per_replica: Examples per replica per step.
      learning_rate: Adam learning rate.
      seed: Seed of initialisation, dropout and shuffling.
      log: Receives every log line: the replicas' lines prefixed `[worker-i] `.
      debug_dir: Debug aid: keep the job's files here (job config, replica
        reports, each replica's final weights as `weights-worker-i.npz`)
        instead of a temporary directory that is removed.
      cluster: Settings of a cluster backend (`tfjob`); ignored by `local`.
      dataset_uri: Where the dataset artifact is stored (its KFP URI); a
        `gs://` dataset is read by cluster replicas in place.

    Returns:
      The `TrainingReport` also written to `model_dir/training_report.json`.

    Raises:
      InvalidInputError: If an argument or the dataset is invalid (nothing is started).
      TrainingFailedError: If a replica fails (the others are stopped first).
    """
    training, spec = _training_and_spec(backend, strategy, workers, model_name, epochs,
                                        batch_size_per_replica, learning_rate, seed)
    _check_dataset(dataset_dir, training, spec)
    _prepare_model_dir(model_dir)
    if debug_dir is not None:
        os.makedirs(debug_dir, exist_ok=True)
    work_dir = debug_dir if debug_dir is not None else tempfile.mkdtemp(prefix="kfdist-train-")
    job = config.JobConfig(dataset_dir=os.path.abspath(dataset_dir),
                           model_dir=os.path.abspath(model_dir), work_dir=os.path.abspath(work_dir),
                           training=training, job=spec, dump_weights=debug_dir is not None)
    try:
        config_path = os.path.join(job.work_dir, JOB_CONFIG_FILE)
        job.write(config_path)
        log(f"train_distributed: {model_name} on {dataset_dir} with {workers} worker(s), "
            f"backend={backend}, strategy={strategy}")
        if backend == config.LOCAL_BACKEND:
            local_backend.run_job(job, config_path, log)
        else:
            from kfdist.components.train_distributed import cluster_backend

            cluster_backend.run_job(job, cluster or ClusterOptions(), log,
                                    dataset_uri=dataset_uri)
        report = assemble_report(job)
    finally:
        if debug_dir is None:
            shutil.rmtree(work_dir, ignore_errors=True)
    with open(os.path.join(model_dir, model_artifact.TRAINING_REPORT_FILE), "w") as f:
        f.write(report.to_json())
    log(f"train_distributed: done in {report.wall_seconds:.1f}s of fit, "
        f"{report.examples_per_second:.0f} examples/s, loss={report.final_loss:.4f} "
        f"accuracy={report.final_accuracy:.4f}")
    return report
