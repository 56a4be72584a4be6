"""The first pass over a source: split membership, counts, labels and statistics.

With `split=hash`, an example's split is a pure function of the example: a
blake2b hash picks one of 10,000 buckets, and buckets below
`eval_fraction * 10,000` are `eval`. Images and TFRecord examples are hashed
by their content (raw input bytes and label): the same data always lands in
the same split, whatever the seed or the order of the source, and duplicate
examples never straddle train and eval. A table's row is hashed by where it
is (its file's name and its position among the file's data rows), so which
columns are read (`exclude_columns`, identifiers left out) never changes which
rows are held out, and two feature sets are compared on the same rows. With
`split=predefined` the source's files decide instead (`splits`).

Feature statistics (for `standardize`) and the vocabularies of string
columns are computed over the *train* split only, streaming (Welford/Chan
updates in float64), so evaluation data never leaks into preprocessing; so
is the finding that a string column identifies rows (`categorical`).
"""

from __future__ import annotations

import dataclasses
import os
import zlib
from hashlib import blake2b
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from kfdist.components.common.class_counts import add_class_counts
from kfdist.components.common.dataset_spec import ExcludedColumn, LabelStatistics
from kfdist.components.common.label_numbers import LabelTally, split_statistics
from kfdist.components.common.errors import KfdistError
from kfdist.components.shard_dataset.categorical import VocabularyCounter
from kfdist.components.shard_dataset.moments import RunningMoments
from kfdist.components.shard_dataset.source import ExampleBatch, Source, check_labels

if TYPE_CHECKING:
    from kfdist.components.shard_dataset.class_ids import ClassIds

SPLIT_BUCKETS = 10_000
PROGRESS_EVERY = 50_000


def eval_threshold(eval_fraction: float) -> int:
    """Number of the `SPLIT_BUCKETS` hash buckets that go to `eval`."""
    return int(round(eval_fraction * SPLIT_BUCKETS))


def categorical_bytes(batch: ExampleBatch) -> List[bytes]:
    """Each example's categorical values as bytes (each value UTF-8, NUL-terminated)."""
    if batch.categorical is None or batch.categorical.size == 0:
        return [b""] * len(batch.labels)
    return [("\0".join(row) + "\0").encode() for row in batch.categorical.tolist()]


def _key_rows(batch: ExampleBatch) -> Tuple[bytes, int]:
    """Each example's raw input bytes followed by its int64 label, as one buffer of equal
    rows, and the row size."""
    count = len(batch.labels)
    inputs = np.ascontiguousarray(batch.inputs).view(np.uint8).reshape(count, -1)
    labels = batch.labels.astype("<i8").view(np.uint8).reshape(count, 8)
    return np.concatenate([inputs, labels], axis=1).tobytes(), inputs.shape[1] + 8


def row_keys(origin: str, first_row: int, count: int) -> List[bytes]:
    """The split hash of `count` table rows from data row `first_row` of file `origin`:
    blake2b-64 of the file's name (without `.gz`), a NUL and the row's position as int64."""
    name = os.path.basename(origin)
    name = (name[:-3] if name.lower().endswith(".gz") else name).encode() + b"\0"
    positions = np.arange(first_row, first_row + count, dtype="<i8").tobytes()
    return [blake2b(name + positions[8 * i:8 * i + 8], digest_size=8).digest()
            for i in range(count)]


def example_keys(batch: ExampleBatch) -> List[bytes]:
    """The split hash of each example: for a table's rows (`batch.first_row` set) their
    `row_keys`; else blake2b-64 of its raw input bytes, its categorical values and its
    int64 label."""
    if len(batch.labels) == 0:
        return []
    if batch.first_row is not None:
        return row_keys(batch.origin, batch.first_row, len(batch.labels))
    rows, size = _key_rows(batch)
    if batch.categorical is None or batch.categorical.size == 0:
        return [blake2b(rows[start:start + size], digest_size=8).digest()
                for start in range(0, len(rows), size)]
    raw = size - 8
    return [blake2b(rows[start:start + raw] + strings + rows[start + raw:start + size],
                    digest_size=8).digest()
            for start, strings in zip(range(0, len(rows), size), categorical_bytes(batch))]


def batch_checksum(batch: ExampleBatch) -> int:
    """CRC-32 of a batch's raw inputs, categorical values and labels (tells the writing
    pass it reads what was scanned)."""
    crc = zlib.crc32(np.ascontiguousarray(batch.inputs).data)
    if batch.categorical is not None:
        crc = zlib.crc32(b"".join(categorical_bytes(batch)), crc)
    return zlib.crc32(np.ascontiguousarray(batch.labels).data, crc)


class SourceChangedError(KfdistError, RuntimeError):
    """The source held different examples in the writing pass than in the scan."""


def scanned_eval_mask(batch: ExampleBatch, index: int,
                      scanned: Optional[Tuple[int, np.ndarray]]) -> np.ndarray:
    """The eval mask the scan recorded for batch `index`, once the batch's CRC-32 proves it is
    the batch that was scanned.

    Args:
      batch: The batch as the writing pass read it.
      index: Its position in its reading order.
      scanned: The scan's `(batch_checksum, np.packbits(eval mask))`; None: not scanned.

    Raises:
      SourceChangedError: If the batch is not the one the scan read.
    """
    if scanned is None or scanned[0] != batch_checksum(batch):
        raise SourceChangedError(f"batch {index} of {batch.origin} differs from what the "
                                 "scan read: the source changed while it was being read")
    return np.unpackbits(scanned[1], count=len(batch.labels)).astype(bool)


def eval_mask(batch: ExampleBatch, threshold: int) -> np.ndarray:
    """Returns a bool array: which examples of `batch` belong to `eval`.

    Args:
      batch: Raw inputs and labels.
      threshold: `eval_threshold(eval_fraction)`.
    """
    if len(batch.labels) == 0:
        return np.zeros(0, dtype=bool)
    hashes = np.frombuffer(b"".join(example_keys(batch)), dtype="<u8")
    return hashes % SPLIT_BUCKETS < threshold


@dataclasses.dataclass(frozen=True)
class ScanResult:
    """What the first pass learned.

    Attributes:
      num_train: Examples put into `train`.
      num_eval: Examples put into `eval`.
      num_classes: Largest label + 1 (the classes, once `class_ids.renumbered`).
      class_counts: Per split (`train`, `eval`), its examples of each class id (as long
        as the largest id of the split needs).
      class_ids: The label numbers in class id order when they are not 0..k-1 (set by
        `class_ids.renumbered`; the writing pass stores class ids); None: the labels are
        the ids.
      mean: Per-column means of the train split (feature vectors only).
      std: Per-column standard deviations of the train split (0 → 1).
      batch_splits: Per source batch, in order: `(crc32 of its bytes, its eval
        mask packed into bits)`, so the writing pass need not hash every
        example again (a few bytes per 1,024 examples).
      vocabularies: Per categorical column but the identifiers, its
        train-split values (tables with string columns only).
      identifiers: The string columns that identify rows, left out of the
        dataset (`categorical.is_identifier`).
      label_statistics: For a regression: the label's figures per split (no
        `class_counts` then).
    """

    num_train: int
    num_eval: int
    num_classes: int
    class_counts: Dict[str, Tuple[int, ...]] = dataclasses.field(default_factory=dict)
    mean: Optional[Tuple[float, ...]] = None
    std: Optional[Tuple[float, ...]] = None
    batch_splits: Tuple[Tuple[int, np.ndarray], ...] = ()
    vocabularies: Optional[Tuple[Tuple[str, ...], ...]] = None
    identifiers: Tuple[ExcludedColumn, ...] = ()
    label_statistics: Optional[Dict[str, LabelStatistics]] = None
    class_ids: Optional["ClassIds"] = None

    @property
    def num_examples(self) -> int:
        """Examples in both splits."""
        return self.num_train + self.num_eval


def scan_source(source: Source, split_mask: Callable[[ExampleBatch], np.ndarray],
                log: Callable[[str], None] = print, keep_columns: Sequence[str] = (),
                observe: Optional[Callable[[ExampleBatch], None]] = None) -> ScanResult:
    """Streams `source` once, validating every example and counting the splits.

    Args:
      source: An opened source.
      split_mask: Which examples of a batch go to `eval` (`splits.SplitPlan.mask_fn`).
      log: Progress messages.
      keep_columns: String columns kept even if they identify rows.
      observe: Also given every batch (the data's statistics: `data_check`).

    Returns:
      Split counts, number of classes and (for feature vectors) train
      statistics, vocabularies and the string columns that identify rows.

    Raises:
      InvalidInputError: If an example is invalid (raised by the reader or by
        the label check).
    """
    feature = source.feature
    vector = len(feature.shape) == 1 and feature.dtype == "float32"
    moments = RunningMoments(feature.shape[0]) if vector else None
    categorical = feature.categorical_columns or ()
    vocabulary = VocabularyCounter(len(categorical)) if categorical else None
    counts = np.zeros(2, np.int64)  # train, eval
    per_class: Dict[str, List[int]] = {"train": [], "eval": []}
    tallies = {"train": LabelTally(), "eval": LabelTally()} if source.is_regression else None
    max_label = -1
    next_report = PROGRESS_EVERY
    batch_splits = []
    for batch in source.batches():
        check_labels(batch.labels, batch.origin)
        if observe is not None:
            observe(batch)
        in_eval = split_mask(batch)
        batch_splits.append((batch_checksum(batch), np.packbits(in_eval)))
        counts += (int(len(in_eval) - in_eval.sum()), int(in_eval.sum()))
        for split, mask in (("train", ~in_eval), ("eval", in_eval)):
            if tallies is not None:
                tallies[split].update(batch.labels[mask])
            else:
                per_class[split] = add_class_counts(per_class[split], batch.labels[mask])
        if len(batch.labels) and tallies is None:
            max_label = max(max_label, int(batch.labels.max()))
        if moments is not None:
            moments.update(batch.inputs[~in_eval])
        if vocabulary is not None:
            vocabulary.update(batch.categorical[~in_eval])
        if counts.sum() >= next_report:
            log(f"scanned {int(counts.sum()):,} examples")
            next_report += PROGRESS_EVERY
    identifiers = vocabulary.identifiers(categorical, keep_columns) if vocabulary else ()
    return ScanResult(
        num_train=int(counts[0]), num_eval=int(counts[1]), num_classes=max_label + 1,
        class_counts={} if tallies else {split: tuple(c) for split, c in per_class.items()},
        label_statistics=split_statistics(tallies) if tallies else None,
        mean=tuple(float(v) for v in moments.mean) if moments is not None else None,
        std=tuple(float(v) for v in moments.std()) if moments is not None else None,
        batch_splits=tuple(batch_splits),
        vocabularies=(vocabulary.vocabularies(categorical, log, [c.name for c in identifiers])
                      or None) if vocabulary else None, identifiers=identifiers)
