"""Which split each example goes to: the source's own splits, or a stable hash.

A source names its splits when its files (or the folders they are in) are
named like TFX ExampleGen's input splits: `train*` for training and `eval*`,
`test*`, `valid*` (and MNIST's `t10k*`) for evaluation, e.g. MNIST's
`train-images-idx3-ubyte.gz` / `t10k-images-idx3-ubyte.gz`, or
`data/train/part-0.csv` / `data/test/part-0.csv`. Such splits are kept: the
source's test split becomes `eval`, never mixed into training.

`split` chooses:

* `auto` (default): the source's splits when it names both, else `hash`;
* `predefined`: the source's splits; an error when it names none;
* `hash`: every example's split is a stable hash of the example (its content;
  a table's row: its file and position, whichever columns are read:
  `scan.eval_mask`), `eval_fraction` of them in `eval`, whatever the names.

A source whose files name splits only in part (`train.csv` beside
`holdout.csv`) is refused, naming the files, rather than guessed at.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from kfdist.components.common.dataset_spec import HASH_SPLIT, PREDEFINED_SPLIT
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.shard_dataset.scan import eval_mask, eval_threshold
from kfdist.components.shard_dataset.source import ExampleBatch

AUTO = "auto"
SPLIT_METHODS = (AUTO, PREDEFINED_SPLIT, HASH_SPLIT)
_SPLIT_NAMES = (("train", re.compile(r"^train", re.IGNORECASE)),
                ("eval", re.compile(r"^(eval|test|valid|t10k)", re.IGNORECASE)))
VALID_NAMES = "train* for training, eval*/test*/valid* (or MNIST's t10k*) for evaluation"


def check_split_method(split: str) -> None:
    """Raises `InvalidInputError` unless `split` is one of `SPLIT_METHODS`."""
    require(split in SPLIT_METHODS,
            f"unknown split {split!r}; expected one of {list(SPLIT_METHODS)}")


def split_named_by(name: str) -> Optional[str]:
    """`train` or `eval` when a file or folder name names a split, else None."""
    for split, pattern in _SPLIT_NAMES:
        if pattern.match(name):
            return split
    return None


def _relative(path: str, root: str) -> str:
    """`path` below `root` (its name alone without a root)."""
    return os.path.relpath(path, root) if root else os.path.basename(path)


def split_of_file(path: str, root: str) -> Optional[str]:
    """The split the first folder or file name under `root` names, or None."""
    for part in _relative(path, root).split(os.sep):
        split = split_named_by(part)
        if split is not None:
            return split
    return None


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """How a source's examples are split.

    Attributes:
      method: `predefined` or `hash`.
      file_splits: For `predefined`: the split of every source file.
      reason: One line for the log: why this method.
    """

    method: str
    file_splits: Optional[Mapping[str, str]] = None
    reason: str = ""

    def split_files(self, root: str) -> Optional[Dict[str, Tuple[str, ...]]]:
        """For `predefined`: the files of each split, relative to `root` (for the metadata)."""
        if self.file_splits is None:
            return None
        return {split: tuple(sorted(_relative(f, root)
                                    for f, s in self.file_splits.items() if s == split))
                for split in ("train", "eval")}

    def mask_fn(self, eval_fraction: float) -> Callable[[ExampleBatch], np.ndarray]:
        """Returns `batch -> bool array`: which examples of a batch go to `eval`."""
        if self.file_splits is None:
            threshold = eval_threshold(eval_fraction)
            return lambda batch: eval_mask(batch, threshold)
        file_splits = self.file_splits
        return lambda batch: np.full(len(batch.labels), file_splits[batch.origin] == "eval",
                                     dtype=bool)


def source_root(local_path: str) -> str:
    """The folder split names are read below: the source itself when it is a folder."""
    return local_path if os.path.isdir(local_path) else os.path.dirname(os.path.abspath(local_path))


def plan_split(method: str, files: Sequence[str], root: str) -> SplitPlan:
    """Decides the split of a source's `files` (see the module docstring).

    Raises:
      InvalidInputError: For `predefined` when the files do not name both
        splits, or (unless `hash`) when some files name a split and others none.
    """
    check_split_method(method)
    if method == HASH_SPLIT:
        return SplitPlan(HASH_SPLIT, reason="split=hash")
    named = {f: split_of_file(f, root) for f in files}
    unnamed = sorted(_relative(f, root) for f, s in named.items() if s is None)
    present = {s for s in named.values() if s is not None}
    if unnamed and present:
        raise InvalidInputError(
            f"some source files name a split and others do not: {unnamed[:5]} name none "
            f"(expected {VALID_NAMES}); rename or move them, or pass split=hash to ignore the names")
    if present == {"train", "eval"}:
        return SplitPlan(PREDEFINED_SPLIT, file_splits=named,
                         reason="the source names its splits")
    names = [os.path.basename(f) for f in files][:5]
    require(method == AUTO,
            f"split=predefined but the source files {names} do not name both splits "
            f"(expected {VALID_NAMES}); name them so, or pass split=hash")
    if present:
        return SplitPlan(HASH_SPLIT, reason=f"the source names only its {present.pop()} split")
    return SplitPlan(HASH_SPLIT, reason="the source names no splits")
