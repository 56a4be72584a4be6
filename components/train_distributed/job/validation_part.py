"""The validation part: examples of the train split set aside to pick the epoch kept.

Early stopping scores each epoch on examples the model does not train on, and
never on the eval split, which `evaluate_model` scores. They are carved from
the train split by position: number the split's records 0, 1, ... in shard
order (shard `s` starts at the sum of the earlier shards' sizes); record `g`
belongs to the validation part when `floor((g + 1) * f)` exceeds `floor(g * f)`
for the fraction `f`. With `f = 0.1` that is records 9, 19, 29, ...: every
tenth, spread evenly over the split, `floor(n * f)` of `n` in all.

The choice depends on nothing but the shard sizes and `f`: the same examples
in every run, every replica and under every strategy, whatever the workers,
the seed or the order each worker reads its files in. The replicas count the
parts from the dataset's metadata, without reading a record.

No TensorFlow here: the step checks the counts before anything starts, and the
replica's input pipeline (`replica.input_pipeline`) applies the same rule in
`tf.data`, with the same float64 arithmetic.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Sequence


def in_validation_part(position: int, fraction: float) -> bool:
    """Whether record `position` (from 0, over the whole train split) is a validation example.

    Args:
      position: The record's position in the train split, shards in order.
      fraction: The validation fraction, in (0, 1).
    """
    return math.floor((position + 1) * fraction) > math.floor(position * fraction)


def validation_count(start: int, count: int, fraction: float) -> int:
    """Validation examples among the `count` records from position `start` on.

    Args:
      start: The first record's position in the train split.
      count: Records in the range.
      fraction: The validation fraction, in (0, 1).
    """
    return math.floor((start + count) * fraction) - math.floor(start * fraction)


def shard_offsets(shard_sizes: Sequence[int]) -> List[int]:
    """The position in the train split of each shard's first record."""
    offsets, total = [], 0
    for size in shard_sizes:
        offsets.append(total)
        total += size
    return offsets


@dataclasses.dataclass(frozen=True)
class SplitCounts:
    """How the train split divides.

    Attributes:
      training: Examples the model trains on.
      validation: Examples of the validation part (0 without early stopping).
    """

    training: int
    validation: int


def split_counts(shard_sizes: Sequence[int], fraction: float, carve: bool) -> SplitCounts:
    """The training and validation examples of a train split with shards of these sizes.

    Args:
      shard_sizes: Records in each train shard, in order.
      fraction: The validation fraction, in (0, 1).
      carve: Whether a validation part is set aside at all (early stopping on).
    """
    total = sum(shard_sizes)
    if not carve:
        return SplitCounts(total, 0)
    validation = validation_count(0, total, fraction)
    return SplitCounts(total - validation, validation)
