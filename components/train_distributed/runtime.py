"""Entry point of `train_distributed`: validate, launch the replicas, assemble the report.

    report = train("/data/digits", "/out/model", workers=2)

The launcher itself never imports TensorFlow (a user model module may): the
replicas do all TensorFlow work. It validates every argument before anything
is created, writes the job's `JobConfig` into a job work directory, runs the
replicas on the chosen backend, then merges the replicas' reports into
`training_report.json` in the model directory (the chief has written the rest
of the Model artifact, see `model_artifact`).

With a single replica there is no TF_CONFIG, as the Training Operator does
for a one-replica job; `multi_worker_mirrored` then runs over the local
devices: the same code path as a multi-worker job.

Training survives failures: every strategy backs up its state into
`<model_dir>/backup/` after each epoch (tf-keras `BackupAndRestore`), a
replica that fails is restarted per the restart policy, and the re-formed
cluster resumes from the last backup. A retried step given the same model
location (one an interrupted attempt left with only `backup/`, `checkpoints/`
and `history.json` in it) resumes too, instead of starting over.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from typing import Callable, Optional

from kfdist.components.common import dataset_spec, model_artifact
from kfdist.components.common.errors import TrainingFailedError, require
from kfdist.components.train_distributed.job import config
from kfdist.components.train_distributed.local import local_backend
from kfdist.components.train_distributed.replica import models
from kfdist.components.train_distributed.kubernetes.options import ClusterOptions

JOB_CONFIG_FILE = "job.json"


#: What an interrupted attempt leaves in its model directory; a retry resumes from it.
RESUMABLE_ENTRIES = frozenset(model_artifact.TRAINING_STATE_ENTRIES)

_TRAINING_FIELDS = {f.name for f in dataclasses.fields(config.TrainingConfig)}
_SPEC_FIELDS = {f.name for f in dataclasses.fields(config.JobSpec)}


def build_configs(*, backend: str = "local", strategy: str = "multi_worker_mirrored",
                  workers: Optional[int] = None, model_name: str = "mnist_mlp", epochs: int = 5,
                  batch_size_per_replica: int = 64, learning_rate: float = 0.001, seed: int = 42,
                  **more) -> "tuple[config.TrainingConfig, config.JobSpec]":
    """Validated `TrainingConfig` and `JobSpec` from `train`'s keyword arguments.

    `more` takes the other fields of both records (`ps`, `chief`, `evaluator`,
    `slots_per_worker`, `restart_policy`, `backoff_limit`,
    `active_deadline_seconds`, `success_policy`, `input_sharding`). `workers`,
    `ps` and `restart_policy` left out, None, 0 or empty take the strategy's
    default (`config.strategy_defaults`).

    Raises:
      InvalidInputError: Naming the first invalid value and what would be valid.
    """
    unknown = sorted(set(more) - _TRAINING_FIELDS - _SPEC_FIELDS)
    require(not unknown, f"unknown training settings {unknown}; valid: "
                         f"{sorted((_TRAINING_FIELDS | _SPEC_FIELDS) - {'backend', 'strategy'})}")
    training = config.TrainingConfig(
        model_name=model_name, epochs=epochs, batch_size_per_replica=batch_size_per_replica,
        learning_rate=learning_rate, seed=seed, strategy=strategy,
        **{k: v for k, v in more.items() if k in _TRAINING_FIELDS})
    spec_fields = {k: v for k, v in more.items() if k in _SPEC_FIELDS}
    spec_fields.update(config.strategy_defaults(strategy, spec_fields.pop("ps", None),
                                                spec_fields.pop("restart_policy", None), workers))
    spec = config.JobSpec(backend=backend, **spec_fields)
    training.validate()
    spec.validate(strategy)
    models.resolve_model(model_name)
    return training, spec


def validate_training_args(**kwargs) -> None:
    """Checks `train`'s settings without a dataset (imports a user model's module).

    Raises:
      InvalidInputError: Naming the first invalid value and what would be valid.
    """
    build_configs(**kwargs)


def _check_dataset(dataset_dir: str, training: config.TrainingConfig,
                   spec: config.JobSpec) -> dataset_spec.DatasetMetadata:
    meta = dataset_spec.load_metadata(dataset_dir)
    models.check_compatible(training.model_name, meta)
    require("train" in meta.splits, f"dataset {dataset_dir!r} has no 'train' split")
    examples = meta.splits["train"].num_examples
    pipelines = spec.input_pipelines(training.strategy)
    smallest_global_batch = training.batch_size_per_replica * pipelines
    require(examples >= smallest_global_batch,
            f"the train split has {examples} examples, fewer than one global batch of "
            f"{training.batch_size_per_replica} x {pipelines} training processes; "
            "lower batch_size_per_replica or workers")
    train_files = meta.shard_paths(dataset_dir, "train")
    config.check_sharding(training.input_sharding, len(train_files), pipelines)
    for path in train_files:
        require(os.path.isfile(path), f"dataset {dataset_dir!r} lacks its train shard {path!r}")
    if spec.evaluator:
        require("eval" in meta.splits and meta.splits["eval"].num_examples > 0,
                f"evaluator=True needs an 'eval' split, and dataset {dataset_dir!r} has none; "
                "shard with eval_fraction > 0 or set evaluator=False")
    return meta


def _prepare_model_dir(model_dir: str) -> bool:
    """Creates `model_dir`; returns whether it holds an interrupted attempt to resume."""
    require(not os.path.exists(model_dir) or os.path.isdir(model_dir),
            f"model_dir {model_dir!r} exists and is not a directory")
    entries = set(os.listdir(model_dir)) if os.path.isdir(model_dir) else set()
    require(entries <= RESUMABLE_ENTRIES,
            f"model_dir {model_dir!r} is not empty: {sorted(entries)[:5]}; a retried step can "
            f"resume only a directory holding nothing but {sorted(RESUMABLE_ENTRIES)}")
    os.makedirs(model_dir, exist_ok=True)
    return model_artifact.BACKUP_DIR in entries


def _read_json(path: str, what: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise TrainingFailedError(f"training ended without {what} ({path} is missing)") from None


def assemble_report(job: config.JobConfig, restarts: int = 0) -> model_artifact.TrainingReport:
    """Merges the chief's summary and every replica's report from the job's work_dir.

    Raises:
      TrainingFailedError: If a report is missing.
    """
    labels = config.training_task_labels(job.training.strategy, job.job)
    replicas = [model_artifact.ReplicaReport(**_read_json(
        config.replica_report_path(job.work_dir, label), f"the report of {label}"))
        for label in labels]
    summary = _read_json(os.path.join(job.work_dir, config.CHIEF_SUMMARY_FILE), "the chief's summary")
    fraction = summary.get("input_bound_fraction")
    return model_artifact.TrainingReport(
        input_bound_fraction=None if fraction is None else float(fraction),
        initial_epoch=int(summary.get("initial_epoch", 0)), restarts=restarts,
        backend=job.job.backend, strategy=job.training.strategy, workers=job.job.workers,
        model_name=job.training.model_name, epochs=int(summary["epochs"]),
        final_loss=float(summary["final_loss"]), final_accuracy=float(summary["final_accuracy"]),
        examples_per_second=float(summary["examples_per_second"]),
        wall_seconds=float(summary["wall_seconds"]), replicas=replicas)


def train(dataset_dir: str, model_dir: str, *, backend: str = "local",
          strategy: str = "multi_worker_mirrored", workers: Optional[int] = None,
          model_name: str = "mnist_mlp", epochs: int = 5, batch_size_per_replica: int = 64,
          learning_rate: float = 0.001, seed: int = 42, log: Callable[[str], None] = print,
          debug_dir: Optional[str] = None, cluster: Optional[ClusterOptions] = None,
          dataset_uri: Optional[str] = None, **more) -> model_artifact.TrainingReport:
    """Trains `model_name` on a kfdist dataset with `workers` replicas; writes the Model artifact.

    Args:
      dataset_dir: Local kfdist dataset directory (`metadata.json` + shards).
      model_dir: Local directory, missing or empty, for the Model artifact.
      backend: Where replicas run: `local` (processes on this machine),
        `tfjob` or `mpijob` (on the cluster).
      strategy: `mirrored`, `multi_worker_mirrored`, `parameter_server` or `horovod`.
      workers: Worker replicas; without a chief, worker 0 leads. None: the
        strategy's default (1 for `mirrored`, else 2).
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
      **more: Replicas and policies (`config.JobSpec`: `ps`, `chief`,
        `evaluator`, `slots_per_worker`, `restart_policy`, `backoff_limit`,
        `active_deadline_seconds`, `success_policy`) and `input_sharding`.

    Returns:
      The `TrainingReport` also written to `model_dir/training_report.json`.

    Raises:
      InvalidInputError: If an argument or the dataset is invalid (nothing is started).
      TrainingFailedError: If a replica fails (the others are stopped first).
    """
    training, spec = build_configs(
        backend=backend, strategy=strategy, workers=workers, model_name=model_name, epochs=epochs,
        batch_size_per_replica=batch_size_per_replica, learning_rate=learning_rate, seed=seed,
        **more)
    _check_dataset(dataset_dir, training, spec)
    resuming = _prepare_model_dir(model_dir)
    if debug_dir is not None:
        os.makedirs(debug_dir, exist_ok=True)
    work_dir = debug_dir if debug_dir is not None else tempfile.mkdtemp(prefix="kfdist-train-")
    job = config.JobConfig(dataset_dir=os.path.abspath(dataset_dir),
                           model_dir=os.path.abspath(model_dir), work_dir=os.path.abspath(work_dir),
                           training=training, job=spec, dump_weights=debug_dir is not None)
    try:
        config_path = os.path.join(job.work_dir, JOB_CONFIG_FILE)
        job.write(config_path)
        replicas = ", ".join(f"{n} {t}" for t, n in spec.replica_counts(strategy).items())
        log(f"train_distributed: {model_name} on {dataset_dir}: {replicas}, "
            f"backend={backend}, strategy={strategy}, restartPolicy {spec.restart_policy}")
        if resuming:
            log(f"train_distributed: {model_dir} holds the backup of an interrupted attempt; "
                "resuming from it")
        restarts = 0
        if backend == config.LOCAL_BACKEND:
            restarts = local_backend.run_job(job, config_path, log).restarts
        else:
            from kfdist.components.train_distributed.kubernetes import backend as cluster_backend

            cluster_backend.run_job(job, cluster or ClusterOptions(), log,
                                    dataset_uri=dataset_uri)
        report = assemble_report(job, restarts)
    finally:
        if debug_dir is None:
            shutil.rmtree(work_dir, ignore_errors=True)
    with open(os.path.join(model_dir, model_artifact.TRAINING_REPORT_FILE), "w") as f:
        f.write(report.to_json())
    fraction = ("" if report.input_bound_fraction is None
                else f", input-bound {report.input_bound_fraction:.1%}")
    log(f"train_distributed: done in {report.wall_seconds:.1f}s of fit, "
        f"{report.examples_per_second:.0f} examples/s, loss={report.final_loss:.4f} "
        f"accuracy={report.final_accuracy:.4f}{fraction}")
    return report
