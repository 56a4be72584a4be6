"""The settings of `shard_dataset.runtime.shard`, checked before anything is read or written."""

from __future__ import annotations

import dataclasses
import numbers
from typing import Optional, Sequence, Tuple

from kfdist.components.common.dataset_spec import AUTO_TASK
from kfdist.components.common.errors import require
from kfdist.components.shard_dataset import readers, splits
from kfdist.components.shard_dataset.label_values import check_task

COMPRESSIONS = ("GZIP",)
LOCAL_RUNNER, BEAM_RUNNER = "local", "beam"
RUNNERS = (LOCAL_RUNNER, BEAM_RUNNER)
#: Upper bound on shards per split (every shard of both splits is open while writing).
MAX_SHARDS = 256


@dataclasses.dataclass(frozen=True)
class ShardOptions:
    """Validated settings of one `shard` call (`runtime.shard` documents each).

    Attributes:
      source_format: `auto`, `images`, `mnist_idx`, `csv`, `tfrecord` or `image_folder`.
      label_column: Label column (CSV) or feature (TFRecord).
      num_shards: Train shards.
      num_eval_shards: Eval shards (the default already resolved).
      eval_fraction: Share of hash buckets that go to `eval`.
      split: `auto`, `predefined` or `hash` (see `splits`).
      seed: Shuffle and shard-assignment seed.
      compression: `GZIP` or None.
      image_shape: Shape of raw images in a TFRecord bytes feature, or None.
      shuffle_buffer_size: Examples held per split while shuffling.
      runner: `local` or `beam`.
      exclude_columns: Source columns left out of the dataset.
      keep_columns: String columns kept even if they identify rows.
      task: `auto`, `classification` or `regression` (`label_values`).
    """

    source_format: str
    label_column: str
    num_shards: int
    num_eval_shards: int
    eval_fraction: float
    split: str
    seed: int
    compression: Optional[str]
    image_shape: Optional[Tuple[int, ...]]
    shuffle_buffer_size: int
    runner: str = LOCAL_RUNNER
    exclude_columns: Tuple[str, ...] = ()
    keep_columns: Tuple[str, ...] = ()
    task: str = AUTO_TASK


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def normalize_compression(compression: Optional[str]) -> Optional[str]:
    """Maps None, ``, `NONE` to None and `gzip`/`GZIP` to `GZIP`; rejects the rest."""
    if compression is None:
        return None
    name = compression.strip().upper() if isinstance(compression, str) else None
    require(name in ("", "NONE", *COMPRESSIONS),
            f"unknown compression {compression!r}; expected None or 'GZIP'")
    return None if name in ("", "NONE") else name


def column_names(names: Optional[Sequence[str]], what: str) -> Tuple[str, ...]:
    """`names` (a list of column names, or None) as a tuple, each stripped.

    Raises:
      InvalidInputError: On a name that is not a non-empty string, or a repeated one.
    """
    if names is None:
        return ()
    require(isinstance(names, (list, tuple)) and all(isinstance(n, str) and n.strip()
                                                     for n in names),
            f"{what} must be a list of column names, got {names!r}")
    stripped = tuple(n.strip() for n in names)
    require(len(set(stripped)) == len(stripped), f"{what} names a column twice: {list(names)}")
    return stripped


def validate_options(*, source_format: str, label_column: str, num_shards: int,
                     num_eval_shards: Optional[int], eval_fraction: float, seed: int,
                     split: str = "auto",
                     compression: Optional[str], image_shape: Optional[Sequence[int]],
                     shuffle_buffer_size: int, runner: str = LOCAL_RUNNER,
                     exclude_columns: Optional[Sequence[str]] = None,
                     keep_columns: Optional[Sequence[str]] = None,
                     task: str = AUTO_TASK) -> ShardOptions:
    """Checks every setting of `shard`; the default `num_eval_shards` is proportional.

    Raises:
      InvalidInputError: Naming the first bad setting and what is valid.
    """
    readers.check_source_format(source_format)
    splits.check_split_method(split)
    check_task(task)
    require(isinstance(label_column, str) and label_column.strip() != "",
            f"label_column must be a non-empty column name, got {label_column!r}")
    require(_is_int(num_shards) and 1 <= num_shards <= MAX_SHARDS,
            f"num_shards must be an integer from 1 to {MAX_SHARDS}, got {num_shards!r}")
    require(isinstance(eval_fraction, (int, float)) and not isinstance(eval_fraction, bool)
            and 0.0 < eval_fraction < 1.0,
            f"eval_fraction must be a number strictly between 0 and 1, got {eval_fraction!r}")
    if num_eval_shards is None:
        num_eval_shards = max(1, round(num_shards * eval_fraction / (1.0 - eval_fraction)))
    require(_is_int(num_eval_shards) and 1 <= num_eval_shards <= MAX_SHARDS,
            f"num_eval_shards must be an integer from 1 to {MAX_SHARDS}, got {num_eval_shards!r}")
    require(_is_int(seed), f"seed must be an integer, got {seed!r}")
    if image_shape is not None:
        require(isinstance(image_shape, (list, tuple)) and len(image_shape) > 0
                and all(_is_int(d) and d > 0 for d in image_shape),
                f"image_shape must be a non-empty list of positive integers, got {image_shape!r}")
    require(runner in RUNNERS, f"unknown runner {runner!r}; expected one of {list(RUNNERS)}")
    require(_is_int(shuffle_buffer_size) and shuffle_buffer_size >= 1,
            f"shuffle_buffer_size must be a positive integer, got {shuffle_buffer_size!r}")
    excluded = column_names(exclude_columns, "exclude_columns")
    kept = column_names(keep_columns, "keep_columns")
    require(label_column not in excluded,
            f"exclude_columns names the label column {label_column!r}; a dataset needs its "
            "label (choose another label_column, or exclude feature columns only)")
    both = [c for c in kept if c in excluded]
    require(not both, f"column(s) {both} are both in exclude_columns and keep_columns; "
                      "name each column in one of them")
    return ShardOptions(
        source_format=source_format, label_column=label_column, num_shards=int(num_shards),
        num_eval_shards=int(num_eval_shards), eval_fraction=float(eval_fraction), split=split,
        seed=int(seed),
        compression=normalize_compression(compression),
        image_shape=tuple(int(d) for d in image_shape) if image_shape is not None else None,
        shuffle_buffer_size=int(shuffle_buffer_size), runner=runner, exclude_columns=excluded,
        keep_columns=kept, task=task)
