"""A source column left out of a dataset, and why (a part of the contract in `dataset_spec`)."""

from __future__ import annotations

import dataclasses
from typing import Optional

#: Why a source column is not in the dataset: the user named it, or it identifies rows.
REQUESTED, IDENTIFIER = "requested", "identifier"


@dataclasses.dataclass(frozen=True)
class ExcludedColumn:
    """A source column left out of the dataset (neither stored nor a model input).

    Attributes:
      name: The column.
      reason: `requested` (named in `exclude_columns`) or `identifier` (a
        string column with a value of its own in nearly every train row).
      distinct_values: For `identifier`: its distinct values in the train split.
      train_rows: For `identifier`: the rows of the train split.
    """

    name: str
    reason: str
    distinct_values: Optional[int] = None
    train_rows: Optional[int] = None

    def describe(self) -> str:
        """One line saying which column was left out and why (logs and reports)."""
        if self.reason != IDENTIFIER:
            return f"column {self.name!r}: excluded as requested (--exclude-columns)"
        share = self.distinct_values / max(self.train_rows, 1)
        return (f"column {self.name!r}: {self.distinct_values:,} distinct values in "
                f"{self.train_rows:,} train rows ({share:.0%}): an identifier, not a feature; "
                "excluded (--exclude-columns to choose, --keep-columns to keep it)")
