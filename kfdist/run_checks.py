"""The checks of `kfdist run`'s options, before anything is written or started.

Every option is checked, and a local source (or the bundled table the run
would write) is read through as the shard step's first pass reads it, so a
bad value, a missing column or a split too small for its shards is named
before a step runs.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from kfdist import run_program
from kfdist.components.common.errors import InvalidInputError
from kfdist.local_run import RUNNERS, RunOptions


def validate_run_options(opts: RunOptions) -> List[str]:
    """Checks every option, and a local source's files, before anything is written.

    Returns:
      What to warn of: a threshold of the other task than the local source's label
      (`threshold_warnings`).

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
    _check_image_target(opts)
    shard = dict(definition.shard_settings, **opts.source_args)
    if opts.source_uri is not None and storage.is_remote(opts.source_uri):
        if not storage.list_uris(opts.source_uri):
            raise InvalidInputError(f"--data {opts.source_uri!r}: nothing exists there")
    task = _check_shard_settings(opts, shard)
    _check_data_validation(opts)
    if opts.runs_a_program:
        run_program.validate_program(opts.train)
    else:
        validate_training_args(**opts.train)
    _check_cluster_place(opts)
    validate_evaluation_args(accuracy_threshold=opts.accuracy_threshold,
                             slice_columns=list(opts.slice_columns),
                             min_improvement=opts.min_improvement,
                             rmse_threshold=opts.rmse_threshold)
    validate_export_args(serving_model_name=opts.serving_name)
    return threshold_warnings(opts, task)


def threshold_warnings(opts: RunOptions, task: Optional[str]) -> List[str]:
    """A threshold set that the run's label does not use: `--accuracy-threshold` for a
    regression, `--rmse-threshold` for classes (`task` None: the label was not read here)."""
    from kfdist.components.common.dataset_spec import CLASSIFICATION, REGRESSION
    from kfdist.pipelines.definition import common_params

    default = {name: value for name, _, value, _ in common_params("")}
    if task == REGRESSION and opts.accuracy_threshold != default["accuracy_threshold"]:
        return [f"--accuracy-threshold {opts.accuracy_threshold:g} does not apply: the label is "
                "a number (regression), judged by its RMSE (--rmse-threshold)"]
    if task == CLASSIFICATION and opts.rmse_threshold != default["rmse_threshold"]:
        return [f"--rmse-threshold {opts.rmse_threshold:g} does not apply: the label holds "
                "classes, judged by their accuracy (--accuracy-threshold)"]
    return []


def _check_data_validation(opts: RunOptions) -> None:
    """The drift thresholds are in [0, 1]; --reference-dataset is a dataset with statistics."""
    import tempfile

    from kfdist.components.shard_dataset.reference import find_reference
    from kfdist.components.shard_dataset.validation import check_thresholds

    check_thresholds(opts.categorical_drift_threshold, opts.numeric_drift_threshold)
    if opts.reference_dataset:
        with tempfile.TemporaryDirectory(prefix="kfdist-reference-") as work:
            find_reference(opts.reference_dataset, "", "", work, log=lambda _: None)


def _check_image_target(opts: RunOptions) -> None:
    """--registry/--tag name the image of the steps (--runner docker) and a cluster job's
    replicas: with neither, they would change nothing."""
    if opts.images is not None and opts.runner != "docker" and opts.train["backend"] == "local":
        raise InvalidInputError(
            "--registry/--tag choose the image the steps run in (--runner docker) and a cluster "
            "backend's replica images; --runner subprocess with --backend local runs no image: "
            "pass --runner docker, or leave --registry/--tag out")


def run_warnings(opts: RunOptions) -> List[str]:
    """What `kfdist run` warns of once the options are valid: GPUs asked for replicas of one of
    kfdist's CPU images."""
    from kfdist.components.train_distributed.kubernetes.options import ClusterOptions
    from kfdist.images import cpu_image_warning, images_from
    from kfdist.step_flags import spell

    train = opts.train
    if opts.runs_a_program or train["backend"] == "local":
        return []
    with images_from(*(opts.images or (None, None))):
        replica_image = ClusterOptions(image=train["image"] or None).image_for(train["strategy"])
    warning = cpu_image_warning(train["gpus_per_worker"], replica_image, spell)
    return [warning] if warning else []


def _check_cluster_place(opts: RunOptions) -> None:
    """With a cluster backend: the job's namespace and the replicas' shared location, which the
    training step would otherwise miss only after the shard step ran (the run's dataset is a
    local directory, which no replica can read)."""
    from kfdist.components.train_distributed.kubernetes.backend import job_place
    from kfdist.components.train_distributed.kubernetes.options import ClusterOptions
    from kfdist.local_run import PIPELINE_ROOT_DIR

    train = opts.train
    if train["backend"] in ("local", "auto"):
        return
    options = ClusterOptions(**{name: train[name] for name in ("namespace", "work_uri", "pvc_name")
                                if train.get(name)})
    job_place(options, os.path.join(opts.output_dir, PIPELINE_ROOT_DIR), "check")


def _shard_default(name: str) -> Any:
    """A parameter's default in the shard step (the `program` pipeline passes no seed)."""
    from kfdist.step_defaults import step_defaults

    return step_defaults("kfdist.components.shard_dataset.component", "shard_dataset")[name]


def _check_shard_settings(opts: RunOptions, shard: Dict[str, Any]) -> Optional[str]:
    """The shard step's settings, and a local source read through as the step's first pass
    reads it (headers, column kinds, every example, split names and sizes); returns its
    label's task (None: a remote source, not read here)."""
    from kfdist.components.common import storage
    from kfdist.components.shard_dataset import beam_remote, readers
    from kfdist.components.shard_dataset.beam_pipeline import pipeline_options
    from kfdist.components.common.dataset_spec import REQUESTED, ExcludedColumn
    from kfdist.components.evaluate_model.slices import check_slice_columns
    from kfdist.components.shard_dataset.categorical import check_kept
    from kfdist.components.shard_dataset.options import BEAM_RUNNER, validate_options
    from kfdist.components.shard_dataset.passes import check_split_sizes
    from kfdist.components.shard_dataset.runtime import DEFAULT_SHUFFLE_BUFFER
    from kfdist.components.shard_dataset.scan import scan_source
    from kfdist.components.shard_dataset.source import ReaderOptions
    from kfdist.components.shard_dataset.splits import plan_split, source_root

    options = validate_options(
        source_format=shard["source_format"], label_column=shard.get("label_column", "label"),
        num_shards=opts.num_shards, num_eval_shards=None, eval_fraction=opts.eval_fraction,
        split=opts.split, seed=opts.train.get("seed", _shard_default("seed")),
        compression=None, image_shape=None,
        shuffle_buffer_size=DEFAULT_SHUFFLE_BUFFER, runner=opts.shard_runner,
        exclude_columns=shard.get("exclude_columns"), keep_columns=shard.get("keep_columns"),
        task=shard.get("task", _shard_default("task")))
    pipeline_options(opts.beam_options)
    if options.runner == BEAM_RUNNER:
        # Remote Beam workers need a gs:// source and somewhere on gs:// to write; in kfp.local
        # the shard step's output is a local artifact directory.
        beam_remote.plan(opts.source_uri or os.path.join(opts.output_dir, "data", opts.pipeline),
                         os.path.join(opts.output_dir, "dataset"), opts.beam_options)
    source_uri = opts.source_uri if opts.source_uri is not None else _sample_table(opts)
    if source_uri is None or storage.is_remote(source_uri):
        return None
    source = readers.open_source(source_uri, options.source_format, ReaderOptions(
        label_column=options.label_column, image_feature=shard.get("image_feature") or None,
        exclude_columns=options.exclude_columns, task=options.task))
    check_kept(source.feature, options.keep_columns)
    plan = plan_split(options.split, source.files, source_root(source_uri))
    # Every example, as the shard step's first pass reads them (image sizes, numbers, labels).
    scan = scan_source(source, plan.mask_fn(options.eval_fraction), log=lambda _: None,
                       keep_columns=options.keep_columns)
    check_split_sizes(scan, options, plan)
    requested = tuple(ExcludedColumn(name=name, reason=REQUESTED)
                      for name in options.exclude_columns)
    check_slice_columns(opts.slice_columns, source.feature, requested + scan.identifiers,
                        label_column=options.label_column)
    return source.task


def _sample_table(opts: RunOptions) -> Optional[str]:
    """The bundled table a run without `--data` reads, checked here when it slices (the other
    samples hold images: slicing them is refused)."""
    from kfdist.components.common.dataset_spec import IMAGE_KEY, FeatureSpec
    from kfdist.components.evaluate_model.slices import check_slice_columns
    from kfdist.sample_data import SAMPLE_TABLES

    if not opts.slice_columns:
        return None
    if opts.sample not in SAMPLE_TABLES:
        check_slice_columns(opts.slice_columns, FeatureSpec(key=IMAGE_KEY, dtype="uint8", shape=()))
    return SAMPLE_TABLES[opts.sample]()
