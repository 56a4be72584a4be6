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
from typing import Any, Callable, Optional

from kfdist.components.common import dataset_spec, model_artifact
from kfdist.components.common.errors import TrainingFailedError, require
from kfdist.components.train_distributed.job import config, step_params
from kfdist.components.train_distributed.job import strategy_rules
from kfdist.components.train_distributed.job import work_files
from kfdist.components.train_distributed import train_split
from kfdist.components.train_distributed.local import local_backend
from kfdist.components.train_distributed.replica import models
from kfdist.components.train_distributed.kubernetes import task_settings
from kfdist.components.train_distributed.kubernetes.options import ClusterOptions

JOB_CONFIG_FILE = "job.json"


#: What an interrupted attempt leaves in its model directory; a retry resumes from it.
RESUMABLE_ENTRIES = frozenset(model_artifact.TRAINING_STATE_ENTRIES)

@dataclasses.dataclass(frozen=True)
class StepJob:
    """The job a training step runs, built from its parameters by `build_job`.

    Attributes:
      training: What every replica trains.
      spec: The replicas and their policies.
      cluster: The cluster settings (used by the `tfjob` and `mpijob` backends).
    """

    training: config.TrainingConfig
    spec: config.JobSpec
    cluster: ClusterOptions


def build_job(*, task_config: Any = None, **values) -> StepJob:
    """The validated job of a training step, from its parameters (`job.step_params`).

    The one place the step's parameters become a job: the component,
    `kfdist train`, `kfdist run` (through the pipeline) and `kfdist render`
    call it. Parameters left out take their defaults; 0 and empty mean
    unset (the strategy's or the cluster's default). `task_config` is the
    step's `dsl.TaskConfig` (what its KFP task sets for the replicas,
    `kubernetes.task_settings`); None outside KFP.

    Raises:
      InvalidInputError: Naming the first invalid value and what would be valid.
    """
    v = step_params.complete(values)
    strategy = v["strategy"]
    training = config.TrainingConfig(
        **{f.name: v[f.name] for f in dataclasses.fields(config.TrainingConfig)})
    if training.early_stopping_patience == 0:  # 0: unset, no early stopping
        training = dataclasses.replace(training, early_stopping_patience=None)
    deadline = v["active_deadline_seconds"]
    spec = config.JobSpec(
        backend=v["backend"], chief=v["chief"], evaluator=v["evaluator"],
        slots_per_worker=v["slots_per_worker"], backoff_limit=v["backoff_limit"],
        active_deadline_seconds=deadline if deadline else None,
        **strategy_rules.strategy_defaults(strategy, v["ps"], v["restart_policy"], v["workers"] or None))
    # An empty string is an unset cluster setting: None in `ClusterOptions`.
    cluster = ClusterOptions(task=task_settings.from_task_config(task_config),
                             **{p.name: None if v[p.name] == "" else v[p.name]
                                for p in step_params.TRAIN_STEP_PARAMS if p.cluster})
    training.validate()
    spec.validate(strategy)
    cluster.validate()
    if training.model_name:
        models.resolve_model(training.model_name)
    return StepJob(training, spec, cluster)


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


def _number(value) -> Optional[float]:
    """A summary's figure as a float; None when it was not had."""
    return None if value is None else float(value)


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
    labels = strategy_rules.training_task_labels(job.training.strategy, job.job)
    replicas = [model_artifact.ReplicaReport(**_read_json(
        work_files.replica_report_path(job.work_dir, label), f"the report of {label}"))
        for label in labels]
    summary = _read_json(os.path.join(job.work_dir, work_files.CHIEF_SUMMARY_FILE), "the chief's summary")
    fraction = summary.get("input_bound_fraction")
    val_loss, val_accuracy = summary.get("final_val_loss"), summary.get("final_val_accuracy")
    return model_artifact.TrainingReport(
        input_bound_fraction=None if fraction is None else float(fraction),
        final_val_loss=None if val_loss is None else float(val_loss),
        final_val_accuracy=None if val_accuracy is None else float(val_accuracy),
        initial_epoch=int(summary.get("initial_epoch", 0)), restarts=restarts,
        kept_epoch=summary.get("kept_epoch"), epochs_planned=job.training.epochs,
        early_stopping_patience=job.training.early_stopping_patience,
        early_stopping_min_delta=job.training.early_stopping_min_delta,
        kept_validation_loss=summary.get("kept_validation_loss"),
        backend=job.job.backend, strategy=job.training.strategy, workers=job.job.workers,
        model_name=job.training.model_name, epochs=int(summary["epochs"]),
        final_loss=float(summary["final_loss"]),
        final_accuracy=_number(summary.get("final_accuracy")),
        final_rmse=_number(summary.get("final_rmse")),
        final_val_rmse=_number(summary.get("final_val_rmse")),
        examples_per_second=float(summary["examples_per_second"]),
        wall_seconds=float(summary["wall_seconds"]), replicas=replicas,
        evaluations=[{key: e[key] for key in ("epoch", "loss", "accuracy") if key in e}
                     for e in work_files.read_evaluations(job.work_dir, job.state_uri)])


def validate_training_args(**values) -> None:
    """Checks a training step's parameters without a dataset (imports a user model's module).

    `backend=auto` is checked as the operator backend it falls back to (no API call).

    Raises:
      InvalidInputError: Naming the first invalid value and what would be valid.
    """
    build_job(**_without_auto(values))


def _without_auto(values: dict) -> dict:
    """`values` with `backend=auto` replaced by its fallback (`tfjob`, or `mpijob` for horovod)."""
    if values.get("backend") != strategy_rules.AUTO_BACKEND:
        return values
    from kfdist.components.train_distributed.kubernetes.backend_choice import fallback_backend

    strategy = step_params.complete(values)["strategy"]
    return dict(values, backend=fallback_backend(strategy))


def resolve_backend(values: dict, log: Callable[[str], None]) -> dict:
    """`values` with `backend=auto` decided against the cluster (`kubernetes.backend_choice`).

    Raises:
      InvalidInputError: Before any API call, when the values are invalid as they are.
    """
    if values.get("backend") != strategy_rules.AUTO_BACKEND:
        return values
    from kfdist.components.train_distributed.kubernetes.backend_choice import choose_backend

    build_job(**_without_auto(values))
    strategy = step_params.complete(values)["strategy"]
    trainjob = dict(values, backend=strategy_rules.TRAINJOB_BACKEND)
    return dict(values, backend=choose_backend(strategy, lambda: check_cluster_job(trainjob), log))


def check_cluster_job(values: dict) -> None:
    """Validates the cluster job these values make, as rendering would (no name, place or API).

    Raises:
      InvalidInputError: Naming what the backend (e.g. a TrainJob's runtime) cannot carry.
    """
    from kfdist.components.train_distributed.kubernetes import backend as cluster_backend

    step = build_job(**values)
    job = config.JobConfig(dataset_dir="dataset", model_dir="model", work_dir="reports",
                           training=step.training, job=step.spec)
    cluster_backend.build_job_spec(job, step.cluster, name="kfdist-check", namespace="default",
                                   work_uri=step.cluster.work_uri or "gs://check/work").validate()


def train(dataset_dir: str, model_dir: str, *, log: Callable[[str], None] = print,
          debug_dir: Optional[str] = None, dataset_uri: Optional[str] = None,
          task_config: Any = None, **values) -> model_artifact.TrainingReport:
    """Trains a model on a kfdist dataset with a distribution strategy; writes the Model artifact.

    Args:
      dataset_dir: Local kfdist dataset directory (`metadata.json` + shards).
      model_dir: Local directory, missing or empty (or holding an interrupted
        attempt's training state, which is resumed), for the Model artifact.
      log: Receives every log line: the replicas' lines prefixed `[worker-i] `.
      debug_dir: Debug aid: keep the job's files here (job config, replica
        reports, each replica's final weights as `weights-worker-i.npz`)
        instead of a temporary directory that is removed.
      dataset_uri: Where the dataset artifact is stored (its KFP URI); a
        remote dataset is read by cluster replicas in place.
      task_config: The step's `dsl.TaskConfig` (see `build_job`).
      **values: The step's parameters (`job.step_params.TRAIN_STEP_PARAMS`);
        those left out take their defaults.

    Returns:
      The `TrainingReport` also written to `model_dir/training_report.json`.

    Raises:
      InvalidInputError: If an argument or the dataset is invalid (nothing is started).
      TrainingFailedError: If a replica fails (the others are stopped first).
    """
    step = build_job(task_config=task_config, **resolve_backend(values, log))
    meta = train_split.check_dataset(dataset_dir, step.training, step.spec)
    training, lowered_batch = train_split.fitted_batch(step.training, step.spec, meta, log)
    step = dataclasses.replace(step, training=training)
    if not step.training.model_name:
        chosen = models.default_model_name(meta)
        log(f"train_distributed: model {chosen} (chosen for the dataset's {meta.feature.key} "
            f"{list(meta.feature.shape)}; pass model_name to choose another)")
        step = dataclasses.replace(step, training=dataclasses.replace(step.training,
                                                                      model_name=chosen))
    resuming = _prepare_model_dir(model_dir)
    if debug_dir is not None:
        os.makedirs(debug_dir, exist_ok=True)
    work_dir = debug_dir if debug_dir is not None else tempfile.mkdtemp(prefix="kfdist-train-")
    job = config.JobConfig(dataset_dir=os.path.abspath(dataset_dir),
                           model_dir=os.path.abspath(model_dir), work_dir=os.path.abspath(work_dir),
                           training=step.training, job=step.spec, dump_weights=debug_dir is not None)
    try:
        report = dataclasses.replace(
            assemble_report(job, _run(job, step, resuming, log, dataset_uri)),
            lowered_batch_size=lowered_batch)
    finally:
        if debug_dir is None:
            shutil.rmtree(work_dir, ignore_errors=True)
    with open(os.path.join(model_dir, model_artifact.TRAINING_REPORT_FILE), "w") as f:
        f.write(report.to_json())
    fraction = ("" if report.input_bound_fraction is None
                else f", input-bound {report.input_bound_fraction:.1%}")
    figures = " ".join(f"{name}={value:.4f}" for name, value in (
        ("accuracy", report.final_accuracy), ("rmse", report.final_rmse),
        ("val_accuracy", report.final_val_accuracy), ("val_rmse", report.final_val_rmse))
        if value is not None)
    log(f"train_distributed: done in {report.wall_seconds:.1f}s of fit, "
        f"{report.examples_per_second:.0f} examples/s, loss={report.final_loss:.4f} "
        f"{figures}{fraction}")
    kept = report.kept()
    if kept is not None:
        log(f"train_distributed: {kept.describe()}")
    return report


def _run(job: config.JobConfig, step: StepJob, resuming: bool, log: Callable[[str], None],
         dataset_uri: Optional[str]) -> int:
    """Runs the replicas on the job's backend; returns how often replicas were restarted."""
    spec, strategy = job.job, job.training.strategy
    config_path = os.path.join(job.work_dir, JOB_CONFIG_FILE)
    job.write(config_path)
    replicas = ", ".join(f"{n} {t}" for t, n in spec.replica_counts(strategy).items())
    log(f"train_distributed: {job.training.model_name} on {job.dataset_dir}: {replicas}, "
        f"backend={spec.backend}, strategy={strategy}, restartPolicy {spec.restart_policy}")
    if resuming:
        log(f"train_distributed: {job.model_dir} holds the backup of an interrupted attempt; "
            "resuming from it")
    if spec.backend == strategy_rules.LOCAL_BACKEND:
        return local_backend.run_job(job, config_path, log).restarts
    from kfdist.components.train_distributed.kubernetes import backend as cluster_backend

    return cluster_backend.run_job(job, step.cluster, log, dataset_uri=dataset_uri)
