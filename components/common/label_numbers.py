"""A regression's label described: its mean, deviation and range per split.

The shard step folds every batch's labels into a `LabelTally` per split; the
dataset's metadata records them (`DatasetMetadata.label_statistics`);
`number_record` turns them into the record the Dataset artifact's metadata and
the run's `summary.json` carry, and `number_lines` into the line the shard log
and the console print, as `class_counts` does for classes.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from kfdist.components.common.dataset_spec import SPLITS, DatasetMetadata, LabelStatistics


class LabelTally:
    """Running count, mean, deviation (Chan et al.), minimum and maximum of numbers."""

    def __init__(self) -> None:
        self.count, self.mean, self.m2 = 0, 0.0, 0.0
        self.low, self.high = math.inf, -math.inf

    def update(self, values: np.ndarray) -> None:
        """Adds a block of labels (float `[B]`)."""
        if len(values) == 0:
            return
        values = values.astype(np.float64)
        n_b, mean_b = len(values), float(values.mean())
        self.merge(n_b, mean_b, float(((values - mean_b) ** 2).sum()),
                   float(values.min()), float(values.max()))

    def merge(self, n_b: int, mean_b: float, m2_b: float, low: float, high: float) -> None:
        """Adds another tally's `(count, mean, M2, min, max)`."""
        if n_b == 0:
            return
        total = self.count + n_b
        delta = mean_b - self.mean
        self.mean += delta * n_b / total
        self.m2 += m2_b + delta ** 2 * self.count * n_b / total
        self.count = total
        self.low, self.high = min(self.low, low), max(self.high, high)

    def statistics(self) -> Optional[LabelStatistics]:
        """The figures (population deviation); None without a label."""
        if not self.count:
            return None
        return LabelStatistics(mean=self.mean, std=math.sqrt(self.m2 / self.count),
                               min=self.low, max=self.high, examples=self.count)


def split_statistics(tallies: Mapping[str, LabelTally]) -> Dict[str, LabelStatistics]:
    """Each split's figures (a split without a label is left out)."""
    return {split: stats for split, tally in tallies.items()
            if (stats := tally.statistics()) is not None}


def number_record(meta: DatasetMetadata) -> Dict[str, Any]:
    """What a regression's label holds: `column`, `task` (`regression`), per split its
    `mean`, `std`, `min`, `max` and `examples`, and `warnings` (one line each)."""
    stats = meta.label_statistics or {}
    record: Dict[str, Any] = {"column": meta.label_column, "task": meta.task,
                              "warnings": []}
    for split in SPLITS:
        if split in stats:
            s = stats[split]
            record[split] = {"mean": s.mean, "std": s.std, "min": s.min, "max": s.max,
                             "examples": s.examples}
    train = stats.get(SPLITS[0])
    if train is not None and train.std == 0:
        record["warnings"].append(
            f"every train label is {train.mean:g}: there is nothing to learn")
    return record


def _number(value: float) -> str:
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def number_lines(record: Mapping[str, Any]) -> List[str]:
    """The lines a person reads of a `number_record`: the label as a number (its range and
    mean over both splits, the train split's deviation), then each warning."""
    column = f"label {record['column']!r}" if record.get("column") else "label"
    parts = [record[split] for split in SPLITS if record.get(split)]
    if not parts:
        return [f"{column}: a number (regression)"]
    examples = sum(int(p["examples"]) for p in parts)
    mean = sum(p["mean"] * int(p["examples"]) for p in parts) / examples
    low, high = min(p["min"] for p in parts), max(p["max"] for p in parts)
    train = record.get(SPLITS[0]) or parts[0]
    return ([f"{column}: a number (regression): {examples:,} examples from {_number(low)} to "
             f"{_number(high)}, mean {_number(mean)} (train deviation {_number(train['std'])})"]
            + [f"warning: {w}" for w in record.get("warnings") or ()])
