"""Runs a shipped pipeline on this machine with kfp.local and summarises it.

Each step runs as a subprocess of this Python (kfp.local's SubprocessRunner);
the training step starts its replicas as further processes with TF_CONFIG.
The console shows a line per step (`run_console`); every line goes to
`<output_dir>/logs/<step>.log`. The shard step's output is cached under the
pipeline root and reused by a later run with the same data and parameters.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
from typing import Any, Dict, Mapping, Optional, Tuple

from kfdist import run_program, run_record, run_summary
from kfdist.components.common.errors import InvalidInputError, TrainingFailedError
from kfdist.components.common.dataset_spec import AUTO_TASK
from kfdist.components.evaluate_model.verdict import (
    ALLOW_CLASS_CHANGE, MIN_IMPROVEMENT, RMSE_THRESHOLD)
from kfdist.components.shard_dataset.validation import (
    CATEGORICAL_DRIFT_THRESHOLD, NUMERIC_DRIFT_THRESHOLD)
from kfdist.run_summary import LOGS_DIR, SUMMARY_FILE  # noqa: F401  (part of this module's API)
from kfdist.serving_name import serving_line
from kfdist.step_runners import (  # noqa: F401  (part of this module's API)
    PIPELINE_ROOT_DIR, RUNNERS, engine_errors, pipeline_to_run, step_images, step_runner)


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """Parameters of a local run of a shipped pipeline (see the pipeline for their meaning).

    Attributes:
      pipeline: `mnist`, `tabular` or `images`.
      source_uri: The data; None: the pipeline's bundled sample.
      training: The training step's parameters (`job.step_params`) to set;
        the others take their defaults. The pipeline runs locally; with a
        cluster backend (`tfjob`, `mpijob`, `trainjob`) its training step
        launches the job on the cluster the kubeconfig names.
      label_column: The label's column or feature (`tabular`, `images`);
        None: `label`, or the sample's.
      image_feature: The image's bytes feature (`images`); empty: the only one.
      exclude_columns: Columns left out of the dataset (`tabular`).
      task: What the label is: `auto`, `classification` or `regression` (`tabular`).
      keep_columns: String columns kept although they identify rows (`tabular`).
      slice_columns: Table columns whose values slice the eval split in the evaluation.
      reference_dataset: A dataset directory to check a table against; empty: the served
        model's training data, if any (`shard_dataset/reference.py`).
      allow_anomalies: Train on a table that breaks its reference's schema.
      categorical_drift_threshold: L-infinity distance above which a string column drifted.
      numeric_drift_threshold: Jensen-Shannon divergence above which a numeric column drifted.
      min_improvement: How much more held-out accuracy than the served model's (the latest
        version under the export base and serving model name) the new model needs.
      allow_class_change: Export a model that predicts other classes than the served one.
      rmse_threshold: A regression's highest held-out RMSE exported (0: predicting the mean's).
      serving_model_name: The name the model is exported (served) under; None: after the
        data (`serving_name`).
      runner: `subprocess` (each step a process of this Python) or `docker` (each step in the
        runtime image, as Kubeflow Pipelines runs it; see `kfdist.docker_run`).
      images: `(registry, tag)` of kfdist's images (tag None: kfdist's version), as `kfdist
        compile --registry/--tag` takes them: the steps run the pipeline compiled for them (in
        that runtime image with `docker`), and a cluster job's replicas default to them; None:
        the published images.
    """

    output_dir: str
    pipeline: str = "mnist"
    source_uri: Optional[str] = None
    label_column: Optional[str] = None
    image_feature: str = ""
    exclude_columns: Tuple[str, ...] = ()
    keep_columns: Tuple[str, ...] = ()
    task: str = AUTO_TASK
    split: str = "auto"
    export_base: Optional[str] = None
    training: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    num_shards: int = 4
    eval_fraction: float = 0.2
    shard_runner: str = "local"
    beam_options: Tuple[str, ...] = ()
    reference_dataset: str = ""
    allow_anomalies: bool = False
    categorical_drift_threshold: float = CATEGORICAL_DRIFT_THRESHOLD
    numeric_drift_threshold: float = NUMERIC_DRIFT_THRESHOLD
    accuracy_threshold: float = 0.9
    min_improvement: float = MIN_IMPROVEMENT
    allow_class_change: bool = ALLOW_CLASS_CHANGE
    rmse_threshold: float = RMSE_THRESHOLD
    slice_columns: Tuple[str, ...] = ()
    serving_model_name: Optional[str] = None
    cache: bool = True
    verbose: bool = False
    runner: str = "subprocess"
    images: Optional[Tuple[str, Optional[str]]] = None

    @functools.cached_property
    def train(self) -> Dict[str, Any]:
        """Every training parameter the pipeline takes, unset ones resolved (workers, ps, ...)."""
        from kfdist.components.train_distributed.job import step_params, strategy_rules

        if self.runs_a_program:
            return run_program.program_training(self.definition, self.training)
        run_program.refuse_program_settings(self.pipeline, self.training)
        values = step_params.complete({**self.definition.train_defaults, **self.training})
        values.update(strategy_rules.strategy_defaults(values["strategy"], values["ps"],
                                               values["restart_policy"], values["workers"] or None))
        return {name: values[name] for name in pipeline_training_params()}

    @property
    def definition(self):
        """The pipeline's `PipelineDefinition`."""
        from kfdist.pipelines import registry

        return registry.get_definition(self.pipeline)

    @property
    def serving_name(self) -> str:
        """The model's name: what it is exported (served) under; by default after the data
        (`serving_name.name_after_data`), else the pipeline's."""
        from kfdist.serving_name import name_of_run_data

        return (self.serving_model_name or name_of_run_data(self.source_uri, self.sample)
                or self.definition.default_model_name)

    @property
    def runs_a_program(self) -> bool:
        """Whether the pipeline trains with the user's program (`train_program`)."""
        from kfdist.pipelines.definition import PROGRAM

        return self.definition.trainer == PROGRAM

    @property
    def sample(self) -> str:
        """The bundled sample the pipeline runs on without `source_uri`."""
        return run_program.SAMPLE_OF_PROGRAM if self.runs_a_program else self.pipeline

    @property
    def source_args(self) -> Dict[str, Any]:
        """The pipeline's source parameters but `source_uri` (label column, image feature,
        columns to exclude or keep)."""
        from kfdist.sample_data import SAMPLE_LABEL_COLUMNS

        given = {"label_column": self.label_column or (
                     SAMPLE_LABEL_COLUMNS.get(self.sample, "label") if self.source_uri is None
                     else "label"),
                 "image_feature": self.image_feature,
                 "exclude_columns": list(self.exclude_columns),
                 "keep_columns": list(self.keep_columns), "task": self.task}
        names = [p[0] for p in self.definition.source_params]
        for name in ("exclude_columns", "keep_columns"):
            if given[name] and name not in names:
                raise InvalidInputError(
                    f"--{name.replace('_', '-')} {','.join(given[name])}: the {self.pipeline} "
                    "pipeline has no columns to choose; it applies to the tabular pipeline")
        if self.task != AUTO_TASK and "task" not in names:
            raise InvalidInputError(
                f"--task {self.task}: the {self.pipeline} pipeline's labels are classes; "
                "--task applies to the tabular pipeline")
        args = {k: v for k, v in given.items() if k in names}
        for name, _, default, _ in self.definition.source_params[1:]:  # after source_uri
            args.setdefault(name, default)  # e.g. the program pipeline's source_format
        return args


def pipeline_training_params() -> Tuple[str, ...]:
    """The training-step parameters every pipeline exposes, in its order (the object store's
    Secret, a parameter of every step, last)."""
    from kfdist.pipelines.definition import OBJECT_STORE_SECRET, TRAIN_PARAMS

    return tuple(p.name for p in TRAIN_PARAMS) + (OBJECT_STORE_SECRET,)


def run_pipeline(opts: RunOptions) -> Dict[str, Any]:
    """Runs a shipped pipeline locally; writes `<output_dir>/summary.json`, `report.html` and
    `data_report.html`.

    Without `source_uri`, the pipeline's bundled sample is written to
    `<output_dir>/data/<pipeline>` first (unchanged files when already there,
    so the shard step's cached output is reused). Without `export_base`,
    models are exported under `<output_dir>/serving`. An earlier run's record is removed
    before the steps start; a run that fails or is stopped writes `summary.json` too
    (`run_record.failed_summary`), and the data check's page when the shard step wrote one.

    Returns:
      The summary written to `summary.json`.

    Raises:
      InvalidInputError: If an option is invalid (nothing is written then).
      TrainingFailedError: If a pipeline step fails (its log's last lines in the message).
    """
    from kfdist.run_checks import run_warnings, validate_run_options

    for warning in validate_run_options(opts) + run_warnings(opts):
        print(f"kfdist: warning: {warning}", file=sys.stderr, flush=True)

    from kfdist.run_console import RunConsole
    from kfdist.sample_data import SAMPLES

    start = time.monotonic()
    output_dir = os.path.abspath(opts.output_dir)
    source_uri = opts.source_uri
    if source_uri is None:
        source_uri = os.path.join(output_dir, "data", opts.sample)
        source_uri = SAMPLES[opts.sample](source_uri).get("path", source_uri)
    export_base = opts.export_base or os.path.join(output_dir, "serving")
    from kfdist.flag_wording import command_wording

    console = RunConsole(os.path.join(output_dir, LOGS_DIR), verbose=opts.verbose,
                         wording=command_wording("run"))
    run_summary.forget_earlier_run(output_dir)
    print(run_summary.headline(opts, output_dir), flush=True)
    print(serving_line(opts, export_base), flush=True)
    pipeline = pipeline_to_run(opts)

    def record_failure(failure: run_record.StepFailure) -> Dict[str, Any]:
        summary = run_record.failed_summary(
            opts, failure, console, pipeline, source_uri=source_uri, export_base=export_base,
            output_dir=output_dir, wall_seconds=time.monotonic() - start,
            data_report=run_record.publish_data_report(console, output_dir),
            report=run_record.publish_evaluation_report(console, output_dir))
        run_record.write_summary(summary, output_dir)
        return summary

    from kfdist.components.train_distributed.kubernetes.lifecycle.step_signals import (
        StepCancelled)

    try:
        task, failure = _run_steps(opts, console, pipeline, source_uri, export_base, output_dir)
    except StepCancelled as cancelled:  # recorded; what stops the processes goes on
        record_failure(run_record.stopped(console, str(cancelled)))
        raise
    if failure is not None:
        print(run_record.format_failure(record_failure(failure)), flush=True)
        raise TrainingFailedError(failure.message(opts.pipeline))
    summary = run_summary.summarise(task.outputs, opts, source_uri, export_base, output_dir,
                                    time.monotonic() - start, steps=console.outcomes,
                                    report=run_summary.publish_report(task.outputs, output_dir),
                                    data_report=run_record.publish_data_report(console,
                                                                               output_dir))
    run_record.write_summary(summary, output_dir)
    return summary


def _run_steps(opts: RunOptions, console, pipeline, source_uri: str, export_base: str,
               output_dir: str):
    """Runs the pipeline's steps with kfp.local.

    Returns:
      `(task, None)` when every step ran and wrote its outputs, else `(None, failure)`
      (`run_record.StepFailure`).
    """
    from kfp import local

    from kfdist.components.common import storage

    engine_failures = engine_errors() if opts.runner == "docker" else ()
    try:
        with step_runner(opts, output_dir, source_uri, export_base, pipeline) as runner, console:
            local.init(runner=runner, pipeline_root=os.path.join(output_dir, PIPELINE_ROOT_DIR),
                       raise_on_error=True, enable_caching=opts.cache)
            task = pipeline(
                source_uri=source_uri, export_base=export_base, num_shards=opts.num_shards,
                split=opts.split, eval_fraction=opts.eval_fraction,
                shard_runner=opts.shard_runner, beam_options=list(opts.beam_options),
                reference_dataset=opts.reference_dataset, allow_anomalies=opts.allow_anomalies,
                categorical_drift_threshold=opts.categorical_drift_threshold,
                numeric_drift_threshold=opts.numeric_drift_threshold,
                accuracy_threshold=opts.accuracy_threshold, min_improvement=opts.min_improvement,
                allow_class_change=opts.allow_class_change, rmse_threshold=opts.rmse_threshold,
                slice_columns=list(opts.slice_columns),
                serving_model_name=opts.serving_name,
                source_version=storage.content_version(source_uri), **opts.source_args,
                **opts.train)
    except RuntimeError as err:
        return None, run_record.step_failure(console, err)
    except engine_failures as err:
        return None, run_record.step_failure(console, err, engine_failed=True)
    try:
        run_summary.check_outputs(task.outputs)
    except TrainingFailedError as err:
        return None, run_record.StepFailure(None, str(err), console.logs_dir)
    return task, None
