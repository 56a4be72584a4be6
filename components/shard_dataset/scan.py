"""The first pass over a source: split membership, counts, labels and statistics.

An example's split is a pure function of its content: the blake2b hash of its
raw input bytes and its label picks one of 10,000 buckets, and buckets below
`eval_fraction * 10,000` are `eval`. The same data therefore always lands in
the same split, whatever the seed or the order of the source, and duplicate
examples never straddle train and eval.

Feature statistics (for `standardize`) are computed over the *train* split
only, streaming (Welford/Chan updates in float64), so evaluation data never
leaks into preprocessing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import zlib
from typing import Callable, List, Optional, Tuple

import numpy as np

from kfdist.components.shard_dataset.source import ExampleBatch, Source, check_labels

SPLIT_BUCKETS = 10_000
PROGRESS_EVERY = 50_000
#: A standard deviation this small relative to the mean means a constant column.
_CONSTANT_RELATIVE_STD = 1e-10


def eval_threshold(eval_fraction: float) -> int:
    """Number of the `SPLIT_BUCKETS` hash buckets that go to `eval`."""
    return int(round(eval_fraction * SPLIT_BUCKETS))


def example_keys(batch: ExampleBatch) -> List[bytes]:
    """The split hash of each example: blake2b-64 of its raw input bytes and int64 label."""
    raw = np.ascontiguousarray(batch.inputs).tobytes()
    labels = batch.labels.astype("<i8").tobytes()
    size = len(raw) // max(len(batch.labels), 1)
    keys = []
    for i in range(len(batch.labels)):
        h = hashlib.blake2b(raw[i * size:(i + 1) * size], digest_size=8)
        h.update(labels[i * 8:(i + 1) * 8])
        keys.append(h.digest())
    return keys


def batch_checksum(batch: ExampleBatch) -> int:
    """CRC-32 of a batch's raw inputs and labels (tells the writing pass it reads what was scanned)."""
    crc = zlib.crc32(np.ascontiguousarray(batch.inputs).data)
    return zlib.crc32(np.ascontiguousarray(batch.labels).data, crc)


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


class RunningMoments:
    """Per-column mean and variance over a stream of row blocks (Chan et al.)."""

    def __init__(self, num_columns: int):
        self.count = 0
        self.mean = np.zeros(num_columns, np.float64)
        self.m2 = np.zeros(num_columns, np.float64)

    def update(self, rows: np.ndarray) -> None:
        """Adds a block of rows `[B, num_columns]`."""
        if len(rows) == 0:
            return
        rows = rows.astype(np.float64)
        n_b = len(rows)
        mean_b = rows.mean(axis=0)
        m2_b = ((rows - mean_b) ** 2).sum(axis=0)
        total = self.count + n_b
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (n_b / total)
        self.m2 = self.m2 + m2_b + delta ** 2 * (self.count * n_b / total)
        self.count = total

    def std(self) -> np.ndarray:
        """Population standard deviation per column; constant columns get 1."""
        std = np.sqrt(self.m2 / max(self.count, 1))
        constant = std <= _CONSTANT_RELATIVE_STD * np.maximum(np.abs(self.mean), 1.0)
        return np.where(constant, 1.0, std)


@dataclasses.dataclass(frozen=True)
class ScanResult:
    """What the first pass learned.

    Attributes:
      num_train: Examples hashed into `train`.
      num_eval: Examples hashed into `eval`.
      num_classes: Largest label + 1.
      mean: Per-column means of the train split (feature vectors only).
      std: Per-column standard deviations of the train split (0 → 1).
      batch_splits: Per source batch, in order: `(crc32 of its bytes, its eval
        mask packed into bits)`, so the writing pass need not hash every
        example again (a few bytes per 1,024 examples).
    """

    num_train: int
    num_eval: int
    num_classes: int
    mean: Optional[Tuple[float, ...]] = None
    std: Optional[Tuple[float, ...]] = None
    batch_splits: Tuple[Tuple[int, np.ndarray], ...] = ()

    @property
    def num_examples(self) -> int:
        """Examples in both splits."""
        return self.num_train + self.num_eval


def scan_source(source: Source, eval_fraction: float,
                log: Callable[[str], None] = print) -> ScanResult:
    """Streams `source` once, validating every example and counting the splits.

    Args:
      source: An opened source.
      eval_fraction: Share of hash buckets that go to `eval`.
      log: Progress messages.

    Returns:
      Split counts, number of classes and (for feature vectors) train statistics.

    Raises:
      InvalidInputError: If an example is invalid (raised by the reader or by
        the label check).
    """
    threshold = eval_threshold(eval_fraction)
    vector = len(source.feature.shape) == 1 and source.feature.dtype == "float32"
    moments = RunningMoments(source.feature.shape[0]) if vector else None
    num_train = num_eval = 0
    max_label = -1
    next_report = PROGRESS_EVERY
    batch_splits = []
    for batch in source.batches():
        check_labels(batch.labels, batch.origin)
        in_eval = eval_mask(batch, threshold)
        batch_splits.append((batch_checksum(batch), np.packbits(in_eval)))
        num_eval += int(in_eval.sum())
        num_train += int(len(in_eval) - in_eval.sum())
        if len(batch.labels):
            max_label = max(max_label, int(batch.labels.max()))
        if moments is not None:
            moments.update(batch.inputs[~in_eval])
        if num_train + num_eval >= next_report:
            log(f"scanned {num_train + num_eval:,} examples")
            next_report += PROGRESS_EVERY
    if moments is None:
        return ScanResult(num_train=num_train, num_eval=num_eval, num_classes=max_label + 1,
                          batch_splits=tuple(batch_splits))
    return ScanResult(num_train=num_train, num_eval=num_eval, num_classes=max_label + 1,
                      mean=tuple(float(v) for v in moments.mean),
                      std=tuple(float(v) for v in moments.std()), batch_splits=tuple(batch_splits))
