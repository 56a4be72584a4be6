"""The `shard_dataset` runtime: validate, scan, write shards, publish atomically.

`shard` turns a source (MNIST IDX, CSV, TFRecord, image folder; local or in an object store) into a
kfdist dataset (see `common/dataset_spec.py`) in two streaming passes (`passes.py`):

1. decide the split (the source's own `train`/`test` files, or a stable hash:
   `splits.py`), then validate and scan every example: split counts,
   classes, statistics;
2. write the shards into a temporary directory beside `output_dir`, then
   `metadata.json`, then rename the directory into place (for an object store, upload
   the shards and `metadata.json` last); Beam workers on other machines write
   under a shared `gs://` prefix instead (`beam_remote`).

Every user error is raised as `InvalidInputError` before anything is written,
and a failure while writing removes the temporary directory, so a directory
with `metadata.json` at `output_dir` is always a complete dataset.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from typing import Callable, Dict, Optional, Sequence, TypeVar

from kfdist.components.common import storage
from kfdist.components.common.class_counts import label_lines, label_record, sum_counts
from kfdist.components.common.dataset_spec import (
    AUTO_TASK, IMAGE_KEY, PREDEFINED_SPLIT, SPLITS, DatasetMetadata, Preprocessing, SplitInfo,
    write_metadata)
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.common.wording import counted
from kfdist.components.shard_dataset import beam_remote, readers
from kfdist.components.shard_dataset.categorical import check_kept, requested, without_columns
from kfdist.components.shard_dataset.class_ids import class_names
from kfdist.components.shard_dataset.column_report import explain_columns
from kfdist.components.shard_dataset.data_check import CheckOptions, DataCheck
from kfdist.components.shard_dataset.reference import find_reference
from kfdist.components.shard_dataset.validation import (
    CATEGORICAL_DRIFT_THRESHOLD, NUMERIC_DRIFT_THRESHOLD, check_thresholds)
from kfdist.components.shard_dataset.options import (
    BEAM_RUNNER, LOCAL_RUNNER, ShardOptions, validate_options)
from kfdist.components.shard_dataset.passes import shard_locally, shard_with_beam
from kfdist.components.shard_dataset.scan import ScanResult
from kfdist.components.shard_dataset.splits import SplitPlan, plan_split, source_root
from kfdist.components.shard_dataset.source import ReaderOptions, Source

DEFAULT_SHUFFLE_BUFFER = 10_000
#: Sources whose label is a column or feature the user names (`label_column`).
LABEL_COLUMN_FORMATS = ("csv", "tfrecord")
T = TypeVar("T")


def call_reporting_missing_bucket(uri: str, call: Callable[[], T]) -> T:
    """Runs `call`, turning "no such bucket" of a `gs://` `uri` into `InvalidInputError`."""
    if not storage.is_gcs(uri):
        return call()
    from google.api_core.exceptions import NotFound

    try:
        return call()
    except NotFound as e:
        bucket, _ = storage.split_gcs(uri)
        raise InvalidInputError(f"the bucket {bucket!r} of {uri!r} does not exist "
                                "(or these credentials cannot see it)") from e


def check_output_dir_free(output_dir: str) -> None:
    """Raises `InvalidInputError` if `output_dir` holds anything (nothing is overwritten)."""
    require(isinstance(output_dir, str) and output_dir.strip() != "",
            f"output_dir must be a path or a gs://, s3:// or minio:// URI, got {output_dir!r}")
    if storage.is_remote(output_dir):
        taken = bool(call_reporting_missing_bucket(
            output_dir, lambda: storage.list_uris(output_dir)))
    else:
        taken = os.path.exists(output_dir) and not (
            os.path.isdir(output_dir) and not os.listdir(output_dir))
    require(not taken, f"output_dir {output_dir!r} already exists and is not empty; "
                       "choose a new directory (existing data is never overwritten)")


def build_metadata(source_uri: str, source: Source, scan: ScanResult, options: ShardOptions,
                   splits: Dict[str, SplitInfo], plan: SplitPlan,
                   root: str = "") -> DatasetMetadata:
    """The dataset's `metadata.json` content."""
    excluded = requested(options.exclude_columns) + scan.identifiers
    if source.feature.key == IMAGE_KEY:
        preprocessing = Preprocessing(kind="scale", scale=1.0 / 255.0, offset=0.0)
    else:
        preprocessing = Preprocessing(kind="standardize", mean=scan.mean, std=scan.std,
                                      vocabularies=scan.vocabularies)
    names = class_names(source, scan)
    num_classes = len(names) if names else scan.num_classes
    counts = {split: tuple(sum_counts(scan.class_counts.get(split, ()), [0] * num_classes))
              for split in SPLITS}
    if source.is_regression:
        num_classes, counts = 0, None
    return DatasetMetadata(
        source_uri=source_uri, source_format=source.source_format,
        feature=without_columns(source.feature, [c.name for c in scan.identifiers]),
        num_classes=num_classes, preprocessing=preprocessing, compression=options.compression,
        seed=options.seed, splits=splits, class_names=names, split=plan.method,
        eval_fraction=None if plan.method == PREDEFINED_SPLIT else options.eval_fraction,
        split_files=plan.split_files(root), excluded_columns=excluded or None,
        label_column=(options.label_column if source.source_format in LABEL_COLUMN_FORMATS
                      else None), class_counts=counts, task=source.task,
        label_statistics=scan.label_statistics)


def publish(build_dir: str, output_dir: str, metadata: DatasetMetadata, workdir: str) -> None:
    """Writes `metadata.json` last and moves (local) or uploads (object store) the dataset."""
    if storage.is_remote(output_dir):
        storage.upload_dir(build_dir, output_dir)
        metadata_dir = os.path.join(workdir, "metadata-only")
        os.makedirs(metadata_dir)
        write_metadata(metadata_dir, metadata)
        storage.upload_dir(metadata_dir, output_dir)
        return
    write_metadata(build_dir, metadata)
    if os.path.isdir(output_dir):
        os.rmdir(output_dir)  # empty (checked up front); the rename needs the name free
    storage.publish_dir(build_dir, output_dir)


def _open_source(source_uri: str, local_source: str, options: ShardOptions, image_feature: str,
                 log: Callable[[str], None]) -> Source:
    """Opens the staged source, checks the kept columns and logs what it holds."""
    source = readers.open_source(local_source, options.source_format, ReaderOptions(
        label_column=options.label_column, image_shape=options.image_shape,
        image_feature=image_feature or None, exclude_columns=options.exclude_columns,
        task=options.task))
    check_kept(source.feature, options.keep_columns)
    for column in requested(options.exclude_columns):
        log(column.describe())
    log(f"source {source_uri}: {source.source_format}, {counted(len(source.files), 'file')}, "
        f"feature {source.feature.key} {list(source.feature.shape)}")
    return source


def _build_dir(output_dir: str, workdir: str) -> str:
    """Where the dataset is built: in `workdir` for an object store, else beside `output_dir` (so
    publishing it is a rename)."""
    if storage.is_remote(output_dir):
        return os.path.join(workdir, "dataset")
    return f"{os.path.abspath(output_dir).rstrip(os.sep)}.tmp-{uuid.uuid4().hex[:12]}"


def shard(source_uri: str, output_dir: str, *, source_format: str = "auto",
          label_column: str = "label", num_shards: int = 4, num_eval_shards: Optional[int] = None,
          eval_fraction: float = 0.2, split: str = "auto", seed: int = 42,
          compression: Optional[str] = None, recorded_uri: Optional[str] = None,
          image_shape: Optional[Sequence[int]] = None, image_feature: str = "",
          shuffle_buffer_size: int = DEFAULT_SHUFFLE_BUFFER, runner: str = LOCAL_RUNNER,
          beam_options: Sequence[str] = (), exclude_columns: Optional[Sequence[str]] = None,
          keep_columns: Optional[Sequence[str]] = None, reference_dataset: str = "",
          export_base: str = "", serving_model_name: str = "", allow_anomalies: bool = False,
          categorical_drift_threshold: float = CATEGORICAL_DRIFT_THRESHOLD,
          numeric_drift_threshold: float = NUMERIC_DRIFT_THRESHOLD, task: str = AUTO_TASK,
          log: Callable[[str], None] = print) -> DatasetMetadata:
    """Shards a source into a kfdist dataset at `output_dir`.

    Args:
      source_uri: Local or remote (`gs://`, `s3://`, `minio://`) file, directory/prefix or
        glob of the source.
      output_dir: Local or remote directory to create (absent or empty).
      source_format: `auto`/`images` (by names), `mnist_idx`, `csv`, `tfrecord`, `image_folder`.
      label_column: Label column (CSV) or int64 label feature (TFRecord).
      num_shards: Shards of the train split.
      num_eval_shards: Shards of the eval split; default in proportion to
        `eval_fraction` (at least 1).
      eval_fraction: Share of examples hashed into `eval`, in (0, 1) (with the
        `hash` split).
      split: `auto` (the source's own splits when its files name them, e.g.
        `train-*`/`t10k-*`, else `hash`), `predefined` or `hash` (see `splits`).
      seed: Seed of the shuffle and of the shard assignment (not of the split,
        which depends on each example alone).
      compression: None or `GZIP`.
      recorded_uri: Where the source is, as the log and the dataset's metadata say it; None:
        `source_uri` (the shard step reads an input artifact's local copy, and gives its URI).
      image_shape: Shape of raw uint8 images held in a TFRecord bytes feature.
      image_feature: The TFRecord bytes feature holding the image; empty: the
        examples' only bytes feature.
      shuffle_buffer_size: Examples held per split for shuffling (bounds memory).
      runner: `local` (this process: a scan pass, then a writing pass) or
        `beam` (an Apache Beam pipeline: `beam_pipeline`); the same split,
        statistics and examples per split.
      beam_options: Beam pipeline options, `KEY=VALUE` each (e.g.
        `runner=DataflowRunner`); default: Beam's FnApiRunner here, one worker
        process per core.
      exclude_columns: CSV columns to leave out of the dataset (not read).
      keep_columns: String columns kept even if they identify rows (by default
        such a column is left out, and the log says so: `categorical`).
      reference_dataset: A dataset directory a shard step wrote, to check a
        table against (`reference`); empty: the dataset the model served under
        `export_base`/`serving_model_name` was trained on, if any.
      export_base: The serving export base of the default reference.
      serving_model_name: The served model's name under `export_base`.
      allow_anomalies: Go on when the table breaks the reference's schema
        (`validation`); by default that fails the step before a shard is written.
      categorical_drift_threshold: L-infinity distance above which a string
        column's distribution drifted (a warning).
      numeric_drift_threshold: Jensen-Shannon divergence above which a numeric
        column's distribution drifted (a warning).
      task: What a table's label is: `auto` (a number when it holds more than
        `label_values.MAX_NUMBER_CLASSES` distinct numbers, else a class), `classification`
        or `regression` (`label_values`).
      log: Receives progress messages.

    Returns:
      The metadata written to `output_dir/metadata.json`.

    Raises:
      InvalidInputError: If a setting or the source is invalid (nothing is written).
      DataAnomalyError: If the table breaks its reference's schema and
        `allow_anomalies` is False (nothing is written).
    """
    started, recorded = time.monotonic(), recorded_uri or source_uri
    check_thresholds(categorical_drift_threshold, numeric_drift_threshold)
    options = validate_options(
        source_format=source_format, label_column=label_column, num_shards=num_shards,
        num_eval_shards=num_eval_shards, eval_fraction=eval_fraction, split=split, seed=seed,
        compression=compression, image_shape=image_shape, shuffle_buffer_size=shuffle_buffer_size,
        runner=runner, exclude_columns=exclude_columns, keep_columns=keep_columns, task=task)
    check_output_dir_free(output_dir)
    shared = (beam_remote.plan(source_uri, output_dir, beam_options)
              if options.runner == BEAM_RUNNER else None)
    with tempfile.TemporaryDirectory(prefix="kfdist-shard-") as workdir:
        local_source = call_reporting_missing_bucket(
            source_uri, lambda: storage.stage_locally(source_uri, workdir))
        source = _open_source(recorded, local_source, options, image_feature, log)
        root = source_root(local_source)
        plan = plan_split(options.split, source.files, root)
        log(f"split: {plan.method} ({plan.reason})" + (
            "" if plan.method == PREDEFINED_SPLIT else f", eval_fraction={options.eval_fraction}"))
        check = DataCheck(
            source, find_reference(reference_dataset, export_base, serving_model_name, workdir,
                                   log),
            CheckOptions(allow_anomalies, categorical_drift_threshold, numeric_drift_threshold),
            excluded=options.exclude_columns, label_column=options.label_column)
        build_dir = _build_dir(output_dir, workdir)
        try:
            if options.runner == BEAM_RUNNER:
                scan, splits = shard_with_beam(source, plan, options, build_dir, beam_options, log,
                                               shared, local_source, check)
            else:
                scan, splits = shard_locally(source, plan, options, build_dir, log, check)
            metadata = build_metadata(recorded, source, scan, options, splits, plan, root)
            for line in explain_columns(metadata, left_out=False,  # those are said above
                                        keep_columns=options.keep_columns):
                log(line)
            for line in label_lines(label_record(metadata)):
                log(line)
            check.write(build_dir, metadata, [c.name for c in scan.identifiers],
                        options.keep_columns)
            publish(build_dir, output_dir, metadata, workdir)
        except BaseException:
            if shared is not None:
                shared.discard(log)
            raise
        finally:
            shutil.rmtree(build_dir, ignore_errors=True)
    log(f"dataset written to {output_dir} in {time.monotonic() - started:.1f}s")
    return metadata
