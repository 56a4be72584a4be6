"""Integer labels of a source that names no classes, made class ids 0..k-1.

TFRecord examples (an int64 label feature) and MNIST IDX files hold their
classes as numbers. When the numbers that occur are exactly 0..k-1 they are
their own class ids and the dataset names no classes (MNIST's digits). Any
other numbers (`3, 5, 9`; `1, 2, 3`) become ids 0..k-1 in ascending order,
named by their numbers (`"3"`, `"5"`, `"9"`), as a table's whole-number labels
do (`label_values`): a model has one output per class that occurs, never
`max + 1`, and its serving signature names each class by its number.

The classes are known once every label is read: the scan counts each
number's examples (`scan`, or the Beam pipeline's scans), `class_ids` turns
those counts into the numbers in class id order, and the writing pass stores
each example's class id (`ClassIds.renumber`), so both runners write the same
records.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence, Tuple

import numpy as np

from kfdist.components.common.class_counts import class_totals
from kfdist.components.shard_dataset.scan import ScanResult, SourceChangedError
from kfdist.components.shard_dataset.source import ExampleBatch, Source


@dataclasses.dataclass(frozen=True)
class ClassIds:
    """The label numbers of a source, in class id order (class id i is `numbers[i]`).

    Attributes:
      numbers: The distinct label numbers that occur, ascending.
    """

    numbers: Tuple[int, ...]

    @property
    def names(self) -> Tuple[str, ...]:
        """The class names: each class's number as written (`"3"`)."""
        return tuple(str(n) for n in self.numbers)

    def renumber(self, batch: ExampleBatch) -> ExampleBatch:
        """`batch` with each label replaced by its class id.

        Raises:
          SourceChangedError: On a label the scan never counted (the source changed).
        """
        lookup = np.full(self.numbers[-1] + 1, -1, np.int64)
        lookup[list(self.numbers)] = np.arange(len(self.numbers))
        labels = batch.labels
        ids = np.where((labels >= 0) & (labels < len(lookup)),
                       lookup[np.clip(labels, 0, len(lookup) - 1)], -1)
        if (ids < 0).any():
            raise SourceChangedError(
                f"{batch.origin!r} holds label {int(labels[ids < 0][0])}, which the scan of the "
                "source never read: the source changed while it was being read")
        return dataclasses.replace(batch, labels=ids)

    def counts(self, class_counts: Mapping[str, Sequence[int]]) -> dict:
        """Per split, the examples of each class id (from those of each label number)."""
        return {split: tuple(int(counts[n]) if n < len(counts) else 0 for n in self.numbers)
                for split, counts in class_counts.items()}


def class_ids(class_counts: Mapping[str, Sequence[int]]) -> Optional[ClassIds]:
    """The label numbers to renumber, from the examples of each number per split; None when
    the numbers that occur are 0..k-1 already (they are their own ids).

    Args:
      class_counts: Per split, the examples of each label number (index = number).
    """
    numbers = tuple(n for n, count in enumerate(class_totals(class_counts)) if count)
    return None if numbers == tuple(range(len(numbers))) else ClassIds(numbers)


def renumbers(source: Source) -> bool:
    """Whether `source`'s labels are numbers it names no classes for (TFRecord, IDX): those
    that are not 0..k-1 are renumbered (a table's or a folder's classes are named already;
    a regression's labels are no classes)."""
    return source.class_names is None and not source.is_regression


def renumbered(scan: ScanResult, source: Source) -> ScanResult:
    """`scan` with its classes renumbered 0..k-1 (`class_ids`) when `source`'s label numbers
    are not 0..k-1: `class_ids` set, `num_classes` k, `class_counts` per class id."""
    ids = class_ids(scan.class_counts) if renumbers(source) else None
    if ids is None:
        return scan
    return dataclasses.replace(scan, class_ids=ids, num_classes=len(ids.numbers),
                               class_counts=ids.counts(scan.class_counts))


def class_names(source: Source, scan: ScanResult) -> Optional[Tuple[str, ...]]:
    """The dataset's class names: the source's, else its renumbered label numbers' (None: the
    labels are the class ids 0..k-1)."""
    if source.class_names is not None:
        return source.class_names
    return scan.class_ids.names if scan.class_ids is not None else None
