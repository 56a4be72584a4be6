"""What a dataset's label is (part of the dataset contract, `dataset_spec`).

A label is a class to predict (`classification`: an int64 class id) or a number
(`regression`: a float32 value, with its figures per split recorded as
`LabelStatistics`); `auto` lets the shard step decide from the data
(`shard_dataset/label_values`).
"""

from __future__ import annotations

import dataclasses

#: What a label is: a class to predict or a number (`task`); `auto` lets the data decide.
CLASSIFICATION, REGRESSION, AUTO_TASK = "classification", "regression", "auto"
TASKS = (AUTO_TASK, CLASSIFICATION, REGRESSION)


@dataclasses.dataclass(frozen=True)
class LabelStatistics:
    """A numeric label's figures (regression) over one split.

    Attributes:
      mean: The mean label.
      std: Its standard deviation (0 when every label is the same).
      min: The smallest label.
      max: The largest label.
      examples: The labels counted.
    """

    mean: float
    std: float
    min: float
    max: float
    examples: int
