"""The passes that write a dataset's shards into its build directory.

Either this process reads the source twice (`shard_locally`: a scan pass for
the checks and statistics, then a writing pass), or an Apache Beam pipeline
reads, splits, writes and computes the statistics at once (`shard_with_beam`).
Both check the split sizes and judge the data (`data_check`) before the
dataset is published.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence, Tuple

from kfdist.components.common.dataset_spec import HASH_SPLIT, PREDEFINED_SPLIT, SplitInfo
from kfdist.components.common.errors import require
from kfdist.components.shard_dataset import beam_remote
from kfdist.components.shard_dataset.categorical import (
    drop_strings, kept_positions, report_identifiers)
from kfdist.components.shard_dataset.class_ids import class_names, renumbered
from kfdist.components.shard_dataset.data_check import DataCheck
from kfdist.components.shard_dataset.example_encoding import CanonicalExampleEncoder
from kfdist.components.shard_dataset.label_check import scanned_classes
from kfdist.components.shard_dataset.options import ShardOptions
from kfdist.components.shard_dataset.scan import (ScanResult, SourceChangedError, scan_source,
                                                  scanned_eval_mask)
from kfdist.components.shard_dataset.source import Source
from kfdist.components.shard_dataset.splits import SplitPlan
from kfdist.components.shard_dataset.writer import SplitWriter

PROGRESS_EVERY = 50_000


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
                 plan: SplitPlan = SplitPlan(HASH_SPLIT),
                 observe: Optional[Callable] = None) -> Dict[str, SplitInfo]:
    """The writing pass: every example into its split's shuffled, balanced shards.

    With the `scan` of the first pass, the split of each example comes from it
    (each batch's CRC-32 proves it is the batch that was scanned) instead of
    hashing every example again; without it, from `plan`. `observe` is given
    every batch as read (the data's statistics: `data_check`). Labels are stored as
    the scan's class ids (`class_ids`).
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
            if observe is not None:
                observe(batch)
            batch = drop_strings(batch, kept)  # columns that identify rows are not stored
            if scan is not None and scan.class_ids is not None:
                batch = scan.class_ids.renumber(batch)
            for writer, mask in ((train, ~in_eval), (evaluation, in_eval)):
                writer.write(encoder.encode_split(batch, mask))
            written += len(batch.labels)
            if written >= next_report:
                log(f"wrote {written:,} examples")
                next_report += PROGRESS_EVERY
        return {"train": train.finish(), "eval": evaluation.finish()}


def _log_counts(scan: ScanResult, options: ShardOptions, log: Callable[[str], None]) -> None:
    log(f"{scan.num_examples:,} examples: {scan.num_train:,} train in {options.num_shards} "
        f"shards, {scan.num_eval:,} eval in {options.num_eval_shards} shards")


def shard_locally(source: Source, plan: SplitPlan, options: ShardOptions, build_dir: str,
                  log: Callable[[str], None], check: DataCheck
                  ) -> Tuple[ScanResult, Dict[str, SplitInfo]]:
    """This process: the scan pass (checks, statistics, the data check), then the writing
    pass."""
    scan = renumbered(scan_source(source, plan.mask_fn(options.eval_fraction), log,
                                  options.keep_columns, observe=check.observe_scan), source)
    check_split_sizes(scan, options, plan)
    report_identifiers(source.feature, scan.identifiers, log)
    check.judge([c.name for c in scan.identifiers], log,
                scanned_classes(class_names(source, scan), scan.class_counts))
    _log_counts(scan, options, log)
    splits = write_splits(source, options, build_dir, log, scan, plan, observe=check.observe_write)
    for split, count in (("train", scan.num_train), ("eval", scan.num_eval)):
        if splits[split].num_examples != count:
            raise SourceChangedError(
                f"wrote {splits[split].num_examples} {split} examples but the scan "
                f"counted {count}: the source changed while it was being read")
    return scan, splits


def shard_with_beam(source: Source, plan: SplitPlan, options: ShardOptions, build_dir: str,
                    beam_options: Sequence[str], log: Callable[[str], None],
                    shared: Optional[beam_remote.SharedBuild], local_source: str,
                    check: DataCheck) -> Tuple[ScanResult, Dict[str, SplitInfo]]:
    """An Apache Beam pipeline reads, splits, writes and computes the statistics at once
    (remote workers under `shared.root`, then `shared.collect`: see `beam_remote`)."""
    from kfdist.components.shard_dataset import beam_pipeline

    scan, splits = beam_pipeline.run(
        source, plan.mask_fn(options.eval_fraction), shared.root if shared else build_dir,
        num_shards={"train": options.num_shards, "eval": options.num_eval_shards},
        seed=options.seed, compression=options.compression, beam_options=beam_options, log=log,
        origins=shared.origins(local_source, source.files) if shared else None,
        keep_columns=options.keep_columns)
    scan = renumbered(scan, source)  # as the pipeline's writers renumbered the labels
    check_split_sizes(scan, options, plan)
    report_identifiers(source.feature, scan.identifiers, log)
    check.read(source)  # the data's statistics: read here
    check.judge([c.name for c in scan.identifiers], log,
                scanned_classes(class_names(source, scan), scan.class_counts))
    _log_counts(scan, options, log)
    if shared is not None:
        shared.collect(build_dir, log)
    return scan, splits
