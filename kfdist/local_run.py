"""Runs a shipped pipeline on this machine with kfp.local and summarises it.

Each step runs as a subprocess of this Python (kfp.local's SubprocessRunner);
the training step starts its replicas as further processes with TF_CONFIG.
The console shows a line per step (`run_console`); every line goes to
`<output_dir>/logs/<step>.log`. The shard step's output is cached under the
pipeline root and reused by a later run with the same data and parameters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import time
from typing import Any, Dict, Mapping, Optional, Tuple

from kfdist import run_program, run_summary
from kfdist.components.common.errors import InvalidInputError, TrainingFailedError
from kfdist.run_summary import LOGS_DIR, SUMMARY_FILE  # noqa: F401  (part of this module's API)

PIPELINE_ROOT_DIR = "pipeline_root"
#: How the steps run: as processes of this Python, or in their image (kfp.local's runners).
RUNNERS = ("subprocess", "docker")


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
      keep_columns: String columns kept although they identify rows (`tabular`).
      runner: `subprocess` (each step a process of this Python) or `docker` (each step in the
        runtime image, as Kubeflow Pipelines runs it; see `kfdist.docker_run`).
    """

    output_dir: str
    pipeline: str = "mnist"
    source_uri: Optional[str] = None
    label_column: Optional[str] = None
    image_feature: str = ""
    exclude_columns: Tuple[str, ...] = ()
    keep_columns: Tuple[str, ...] = ()
    split: str = "auto"
    export_base: Optional[str] = None
    training: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    num_shards: int = 4
    eval_fraction: float = 0.2
    shard_runner: str = "local"
    beam_options: Tuple[str, ...] = ()
    accuracy_threshold: float = 0.9
    serving_model_name: Optional[str] = None
    cache: bool = True
    verbose: bool = False
    runner: str = "subprocess"

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
    def runs_a_program(self) -> bool:
        """Whether the pipeline trains with the user's program (`train_program`)."""
        from kfdist.pipelines.pipeline_factory import PROGRAM

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
                 "keep_columns": list(self.keep_columns)}
        names = [p[0] for p in self.definition.source_params]
        for name in ("exclude_columns", "keep_columns"):
            if given[name] and name not in names:
                raise InvalidInputError(
                    f"--{name.replace('_', '-')} {','.join(given[name])}: the {self.pipeline} "
                    "pipeline has no columns to choose; it applies to the tabular pipeline")
        args = {k: v for k, v in given.items() if k in names}
        for name, _, default, _ in self.definition.source_params[1:]:  # after source_uri
            args.setdefault(name, default)  # e.g. the program pipeline's source_format
        return args


def pipeline_training_params() -> Tuple[str, ...]:
    """The training-step parameters every pipeline exposes, in its order."""
    from kfdist.pipelines.pipeline_factory import TRAIN_PARAMS

    return tuple(p.name for p in TRAIN_PARAMS)


def validate_run_options(opts: RunOptions) -> None:
    """Checks every option, and a local source's files, before anything is written.

    Raises:
      InvalidInputError: Naming the first bad value and what would be valid.
    """
    from kfdist.components.common import storage
    from kfdist.components.evaluate_model.runtime import validate_evaluation_args
    from kfdist.components.export_saved_model.runtime import validate_export_args
    from kfdist.components.train_distributed.runtime import validate_training_args

    from kfdist.out_dirs import check_dir_path

    check_dir_path(opts.output_dir, "--output")
    definition = opts.definition  # an unknown pipeline is named here
    if opts.runner not in RUNNERS:
        raise InvalidInputError(f"--runner {opts.runner!r}: valid runners are {RUNNERS}")
    if opts.runner == "docker" and opts.runs_a_program:
        raise InvalidInputError("--runner docker runs kfdist's own pipelines in their image; the "
                                "program pipeline runs a program from this machine: use "
                                "--runner subprocess")
    shard = dict(definition.shard_settings, **opts.source_args)
    if opts.source_uri is not None and storage.is_gcs(opts.source_uri):
        if not storage.list_uris(opts.source_uri):
            raise InvalidInputError(f"--data {opts.source_uri!r}: nothing exists there")
    _check_shard_settings(opts, shard)
    if opts.runs_a_program:
        run_program.validate_program(opts.train)
    else:
        validate_training_args(**opts.train)
    validate_evaluation_args(accuracy_threshold=opts.accuracy_threshold)
    validate_export_args(serving_model_name=opts.serving_model_name or definition.serving_model_name)


def _shard_default(name: str) -> Any:
    """A parameter's default in the shard step (the `program` pipeline passes no seed)."""
    import inspect

    from kfdist.components.shard_dataset.component import shard_dataset

    return inspect.signature(shard_dataset.python_func).parameters[name].default


def _check_shard_settings(opts: RunOptions, shard: Dict[str, Any]) -> None:
    """The shard step's settings, and a local source read through as the step's first pass
    reads it (headers, column kinds, every example, split names and sizes)."""
    from kfdist.components.common import storage
    from kfdist.components.shard_dataset import beam_remote, readers
    from kfdist.components.shard_dataset.beam_pipeline import pipeline_options
    from kfdist.components.shard_dataset.categorical import check_kept
    from kfdist.components.shard_dataset.options import BEAM_RUNNER, validate_options
    from kfdist.components.shard_dataset.runtime import DEFAULT_SHUFFLE_BUFFER, check_split_sizes
    from kfdist.components.shard_dataset.scan import scan_source
    from kfdist.components.shard_dataset.source import ReaderOptions
    from kfdist.components.shard_dataset.splits import plan_split, source_root

    options = validate_options(
        source_format=shard["source_format"], label_column=shard.get("label_column", "label"),
        num_shards=opts.num_shards, num_eval_shards=None, eval_fraction=opts.eval_fraction,
        split=opts.split, seed=opts.train.get("seed", _shard_default("seed")),
        compression=None, image_shape=None,
        shuffle_buffer_size=DEFAULT_SHUFFLE_BUFFER, runner=opts.shard_runner,
        exclude_columns=shard.get("exclude_columns"), keep_columns=shard.get("keep_columns"))
    pipeline_options(opts.beam_options)
    if options.runner == BEAM_RUNNER:
        # Remote Beam workers need a gs:// source and somewhere on gs:// to write; in kfp.local
        # the shard step's output is a local artifact directory.
        beam_remote.plan(opts.source_uri or os.path.join(opts.output_dir, "data", opts.pipeline),
                         os.path.join(opts.output_dir, "dataset"), opts.beam_options)
    if opts.source_uri is None or storage.is_gcs(opts.source_uri):
        return
    source = readers.open_source(opts.source_uri, options.source_format, ReaderOptions(
        label_column=options.label_column, image_feature=shard.get("image_feature") or None,
        exclude_columns=options.exclude_columns))
    check_kept(source.feature, options.keep_columns)
    plan = plan_split(options.split, source.files, source_root(opts.source_uri))
    # Every example, as the shard step's first pass reads them (image sizes, numbers, labels).
    check_split_sizes(scan_source(source, plan.mask_fn(options.eval_fraction), log=lambda _: None),
                      options, plan)


def run_pipeline(opts: RunOptions) -> Dict[str, Any]:
    """Runs a shipped pipeline locally and writes `<output_dir>/summary.json`.

    Without `source_uri`, the pipeline's bundled sample is written to
    `<output_dir>/data/<pipeline>` first (unchanged files when already there,
    so the shard step's cached output is reused). Without `export_base`,
    models are exported under `<output_dir>/serving`.

    Returns:
      The summary written to `summary.json`.

    Raises:
      InvalidInputError: If an option is invalid (nothing is written then).
      TrainingFailedError: If a pipeline step fails (its log's last lines in the message).
    """
    validate_run_options(opts)
    from kfp import local

    from kfdist.components.common import storage
    from kfdist.pipelines import registry
    from kfdist.run_console import RunConsole
    from kfdist.sample_data import SAMPLES

    start = time.monotonic()
    output_dir = os.path.abspath(opts.output_dir)
    source_uri = opts.source_uri
    if source_uri is None:
        source_uri = os.path.join(output_dir, "data", opts.sample)
        source_uri = SAMPLES[opts.sample](source_uri).get("path", source_uri)
    export_base = opts.export_base or os.path.join(output_dir, "serving")
    console = RunConsole(os.path.join(output_dir, LOGS_DIR), verbose=opts.verbose)
    print(run_summary.headline(opts, output_dir), flush=True)
    try:
        with _runner(opts, output_dir, source_uri, export_base) as runner, console:
            local.init(runner=runner, pipeline_root=os.path.join(output_dir, PIPELINE_ROOT_DIR),
                       raise_on_error=True, enable_caching=opts.cache)
            task = registry.get_pipeline(opts.pipeline)(
                source_uri=source_uri, export_base=export_base, num_shards=opts.num_shards,
                split=opts.split, eval_fraction=opts.eval_fraction,
                shard_runner=opts.shard_runner, beam_options=list(opts.beam_options),
                accuracy_threshold=opts.accuracy_threshold,
                serving_model_name=opts.serving_model_name or opts.definition.serving_model_name,
                source_version=storage.content_version(source_uri), **opts.source_args,
                **opts.train)
    except RuntimeError as err:
        from kfdist.run_console import strip_colours

        err = strip_colours(str(err))
        step = console.failed_step or "a step"
        where = (f"; its whole log: {console.log_path(console.failed_step)}"
                 if console.failed_step else f"; logs: {console.logs_dir}")
        raise TrainingFailedError(
            f"pipeline {opts.pipeline!r} failed in {step}: {err}{where}") from None
    run_summary.check_outputs(task.outputs)
    summary = run_summary.summarise(task.outputs, opts, source_uri, export_base, output_dir,
                                    time.monotonic() - start)
    with open(os.path.join(output_dir, run_summary.SUMMARY_FILE), "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
    return summary


@contextlib.contextmanager
def _runner(opts: RunOptions, output_dir: str, source_uri: str, export_base: str):
    """The kfp.local runner of `opts.runner`; a docker one sees the run's directories."""
    from kfp import local

    from kfdist.components.common import storage

    if opts.runner != "docker":
        yield local.SubprocessRunner(use_venv=False)
        return
    from kfdist import docker_run

    # The pipeline root exists before the image's user is given the run's directories.
    writable = [output_dir, os.path.join(output_dir, PIPELINE_ROOT_DIR)] + (
        [export_base] if not storage.is_gcs(export_base) else [])
    readable = [source_uri] if not storage.is_gcs(source_uri) else []
    with docker_run.docker_runner(writable, readable) as runner:
        yield runner
