"""The `shard_dataset` runtime: validate, scan, write shards, publish atomically.

`shard` turns a source (MNIST IDX, CSV or TFRecord; local or `gs://`) into a
kfdist dataset (see `common/dataset_spec.py`) in two streaming passes:

1. decide the split (the source's own `train`/`test` files, or a content hash:
   `splits.py`), then validate and scan every example: split counts,
   classes, statistics;
2. write the shards into a temporary directory beside `output_dir`, then
   `metadata.json`, then rename the directory into place (for `gs://`, upload
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
from typing import Callable, Dict, Optional, Sequence, Tuple, TypeVar

from kfdist.components.common import storage
from kfdist.components.common.dataset_spec import (
    HASH_SPLIT, IMAGE_KEY, PREDEFINED_SPLIT, DatasetMetadata, Preprocessing, SplitInfo, write_metadata)
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.shard_dataset import beam_remote, readers
from kfdist.components.shard_dataset.categorical import (
    check_kept, drop_strings, kept_positions, report_identifiers, requested, without_columns)
from kfdist.components.shard_dataset.options import (
    BEAM_RUNNER, LOCAL_RUNNER, ShardOptions, validate_options)
from kfdist.components.shard_dataset.scan import (ScanResult, SourceChangedError, scan_source,
                                                  scanned_eval_mask)
from kfdist.components.shard_dataset.splits import SplitPlan, plan_split, source_root
from kfdist.components.shard_dataset.example_encoding import CanonicalExampleEncoder
from kfdist.components.shard_dataset.source import ReaderOptions, Source
from kfdist.components.shard_dataset.writer import SplitWriter

DEFAULT_SHUFFLE_BUFFER = 10_000
PROGRESS_EVERY = 50_000
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
            f"output_dir must be a path or gs:// URI, got {output_dir!r}")
    if storage.is_gcs(output_dir):
        taken = bool(call_reporting_missing_bucket(
            output_dir, lambda: storage.list_uris(output_dir)))
    else:
        taken = os.path.exists(output_dir) and not (
            os.path.isdir(output_dir) and not os.listdir(output_dir))
    require(not taken, f"output_dir {output_dir!r} already exists and is not empty; "
                       "choose a new directory (existing data is never overwritten)")


def check_split_sizes(scan: ScanResult, options: ShardOptions, plan: SplitPlan) -> None:
    """Raises `InvalidInputError` if a split has fewer examples than shards."""
    how = ("the source's own split" if plan.method == PREDEFINED_SPLIT
           else f"eval_fraction={options.eval_fraction}")
    for split, count, shards, knob in (("train", scan.num_train, options.num_shards, "num_shards"),
                                       ("eval", scan.num_eval, options.num_eval_shards,
                                        "num_eval_shards")):
        require(count >= shards,
                f"the {split} split gets {count} of {scan.num_examples} examples ({how}) but "
                f"{knob}={shards}; every shard needs an example: lower {knob}"
                + (", change eval_fraction" if plan.method != PREDEFINED_SPLIT else "")
                + " or add data")


def _split_masks(source: Source, scan: Optional[ScanResult], split_mask):
    """Each source batch with its eval mask: the scan's, checked against the batch's CRC."""
    known = list(scan.batch_splits) if scan is not None else []
    for index, batch in enumerate(source.batches()):
        if not known:
            yield batch, split_mask(batch)
            continue
        yield batch, scanned_eval_mask(batch, index, known[index] if index < len(known) else None)


def write_splits(source: Source, options: ShardOptions, root: str,
                 log: Callable[[str], None], scan: Optional[ScanResult] = None,
                 plan: SplitPlan = SplitPlan(HASH_SPLIT)) -> Dict[str, SplitInfo]:
    """The writing pass: every example into its split's shuffled, balanced shards.

    With the `scan` of the first pass, the split of each example comes from it
    (each batch's CRC-32 proves it is the batch that was scanned) instead of
    hashing every example again; without it, from `plan`.
    """
    encoder = CanonicalExampleEncoder.for_feature(source.feature)
    kept = kept_positions(source.feature, [c.name for c in scan.identifiers] if scan else ())

    def open_writer(split: str, num_shards: int) -> SplitWriter:
        return SplitWriter(root, split, num_shards, compression=options.compression,
                           seed=options.seed, shuffle_buffer_size=options.shuffle_buffer_size,
                           log=log)

    written, next_report = 0, PROGRESS_EVERY
    with open_writer("train", options.num_shards) as train, \
            open_writer("eval", options.num_eval_shards) as evaluation:
        for batch, in_eval in _split_masks(source, scan, plan.mask_fn(options.eval_fraction)):
            batch = drop_strings(batch, kept)  # columns that identify rows are not stored
            for writer, mask in ((train, ~in_eval), (evaluation, in_eval)):
                writer.write(encoder.encode_split(batch, mask))
            written += len(batch.labels)
            if written >= next_report:
                log(f"wrote {written:,} examples")
                next_report += PROGRESS_EVERY
        return {"train": train.finish(), "eval": evaluation.finish()}


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
    num_classes = len(source.class_names) if source.class_names else scan.num_classes
    return DatasetMetadata(
        source_uri=source_uri, source_format=source.source_format,
        feature=without_columns(source.feature, [c.name for c in scan.identifiers]),
        num_classes=num_classes, preprocessing=preprocessing, compression=options.compression,
        seed=options.seed, splits=splits, class_names=source.class_names, split=plan.method,
        eval_fraction=None if plan.method == PREDEFINED_SPLIT else options.eval_fraction,
        split_files=plan.split_files(root), excluded_columns=excluded or None)


def publish(build_dir: str, output_dir: str, metadata: DatasetMetadata, workdir: str) -> None:
    """Writes `metadata.json` last and moves (local) or uploads (`gs://`) the dataset."""
    if storage.is_gcs(output_dir):
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


def _log_counts(scan: ScanResult, options: ShardOptions, log: Callable[[str], None]) -> None:
    log(f"{scan.num_examples:,} examples: {scan.num_train:,} train in {options.num_shards} "
        f"shards, {scan.num_eval:,} eval in {options.num_eval_shards} shards")


def _shard_locally(source: Source, plan: SplitPlan, options: ShardOptions, build_dir: str,
                   log: Callable[[str], None]) -> Tuple[ScanResult, Dict[str, SplitInfo]]:
    """This process: the scan pass (checks, statistics), then the writing pass."""
    scan = scan_source(source, plan.mask_fn(options.eval_fraction), log, options.keep_columns)
    check_split_sizes(scan, options, plan)
    report_identifiers(source.feature, scan.identifiers, log)
    _log_counts(scan, options, log)
    splits = write_splits(source, options, build_dir, log, scan, plan)
    for split, count in (("train", scan.num_train), ("eval", scan.num_eval)):
        if splits[split].num_examples != count:
            raise SourceChangedError(
                f"wrote {splits[split].num_examples} {split} examples but the scan "
                f"counted {count}: the source changed while it was being read")
    return scan, splits


def _shard_with_beam(source: Source, plan: SplitPlan, options: ShardOptions, build_dir: str,
                     beam_options: Sequence[str], log: Callable[[str], None],
                     shared: Optional[beam_remote.SharedBuild], local_source: str
                     ) -> Tuple[ScanResult, Dict[str, SplitInfo]]:
    """An Apache Beam pipeline reads, splits, writes and computes the statistics at once
    (remote workers under `shared.root`, then `shared.collect`: see `beam_remote`)."""
    from kfdist.components.shard_dataset import beam_pipeline

    scan, splits = beam_pipeline.run(
        source, plan.mask_fn(options.eval_fraction), shared.root if shared else build_dir,
        num_shards={"train": options.num_shards, "eval": options.num_eval_shards},
        seed=options.seed, compression=options.compression, beam_options=beam_options, log=log,
        origins=shared.origins(local_source, source.files) if shared else None,
        keep_columns=options.keep_columns)
    check_split_sizes(scan, options, plan)
    report_identifiers(source.feature, scan.identifiers, log)
    _log_counts(scan, options, log)
    if shared is not None:
        shared.collect(build_dir, log)
    return scan, splits


def shard(source_uri: str, output_dir: str, *, source_format: str = "auto",
          label_column: str = "label", num_shards: int = 4, num_eval_shards: Optional[int] = None,
          eval_fraction: float = 0.2, split: str = "auto", seed: int = 42,
          compression: Optional[str] = None,
          image_shape: Optional[Sequence[int]] = None, image_feature: str = "",
          shuffle_buffer_size: int = DEFAULT_SHUFFLE_BUFFER, runner: str = LOCAL_RUNNER,
          beam_options: Sequence[str] = (), exclude_columns: Optional[Sequence[str]] = None,
          keep_columns: Optional[Sequence[str]] = None,
          log: Callable[[str], None] = print) -> DatasetMetadata:
    """Shards a source into a kfdist dataset at `output_dir`.

    Args:
      source_uri: Local or `gs://` file, directory/prefix or glob of the source.
      output_dir: Local or `gs://` directory to create (absent or empty).
      source_format: `auto` (by file names), `mnist_idx`, `csv` or `tfrecord`.
      label_column: Label column (CSV) or int64 label feature (TFRecord).
      num_shards: Shards of the train split.
      num_eval_shards: Shards of the eval split; default in proportion to
        `eval_fraction` (at least 1).
      eval_fraction: Share of examples hashed into `eval`, in (0, 1) (with the
        `hash` split).
      split: `auto` (the source's own splits when its files name them, e.g.
        `train-*`/`t10k-*`, else `hash`), `predefined` or `hash` (see `splits`).
      seed: Seed of the shuffle and of the shard assignment (not of the split,
        which depends on example content only).
      compression: None or `GZIP`.
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
      log: Receives progress messages.

    Returns:
      The metadata written to `output_dir/metadata.json`.

    Raises:
      InvalidInputError: If a setting or the source is invalid (nothing is written).
    """
    started = time.monotonic()
    options = validate_options(
        source_format=source_format, label_column=label_column, num_shards=num_shards,
        num_eval_shards=num_eval_shards, eval_fraction=eval_fraction, split=split, seed=seed,
        compression=compression, image_shape=image_shape, shuffle_buffer_size=shuffle_buffer_size,
        runner=runner, exclude_columns=exclude_columns, keep_columns=keep_columns)
    check_output_dir_free(output_dir)
    shared = (beam_remote.plan(source_uri, output_dir, beam_options)
              if options.runner == BEAM_RUNNER else None)
    with tempfile.TemporaryDirectory(prefix="kfdist-shard-") as workdir:
        local_source = call_reporting_missing_bucket(
            source_uri, lambda: storage.stage_locally(source_uri, workdir))
        source = readers.open_source(local_source, options.source_format, ReaderOptions(
            label_column=options.label_column, image_shape=options.image_shape,
            image_feature=image_feature or None, exclude_columns=options.exclude_columns))
        check_kept(source.feature, options.keep_columns)
        for column in requested(options.exclude_columns):
            log(column.describe())
        log(f"source {source_uri}: {source.source_format}, {len(source.files)} file(s), "
            f"feature {source.feature.key} {list(source.feature.shape)}")
        root = source_root(local_source)
        plan = plan_split(options.split, source.files, root)
        log(f"split: {plan.method} ({plan.reason})" + (
            "" if plan.method == PREDEFINED_SPLIT else f", eval_fraction={options.eval_fraction}"))
        if storage.is_gcs(output_dir):
            build_dir = os.path.join(workdir, "dataset")
        else:
            build_dir = f"{os.path.abspath(output_dir).rstrip(os.sep)}.tmp-{uuid.uuid4().hex[:12]}"
        try:
            if options.runner == BEAM_RUNNER:
                scan, splits = _shard_with_beam(source, plan, options, build_dir, beam_options, log,
                                                shared, local_source)
            else:
                scan, splits = _shard_locally(source, plan, options, build_dir, log)
            metadata = build_metadata(source_uri, source, scan, options, splits, plan, root)
            publish(build_dir, output_dir, metadata, workdir)
        except BaseException:
            if shared is not None:
                shared.discard(log)
            raise
        finally:
            shutil.rmtree(build_dir, ignore_errors=True)
    log(f"dataset written to {output_dir} in {time.monotonic() - started:.1f}s")
    return metadata
