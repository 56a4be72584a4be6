"""A table's per-column mean and standard deviation, over a stream of row blocks.

The shard step standardises numeric columns with the train split's moments; the
scan and the Beam pipeline's per-bundle partial results (`beam_transforms`)
both fold their blocks of rows with `RunningMoments`.
"""

from __future__ import annotations

import numpy as np

#: A standard deviation this small relative to the mean means a constant column.
_CONSTANT_RELATIVE_STD = 1e-10


class RunningMoments:
    """Per-column mean and variance over a stream of row blocks (Chan et al.).

    NaN (a missing value) is left out of its column's statistics; a column
    without any value gets mean 0.
    """

    def __init__(self, num_columns: int):
        self.count = np.zeros(num_columns, np.float64)
        self.mean = np.zeros(num_columns, np.float64)
        self.m2 = np.zeros(num_columns, np.float64)

    def update(self, rows: np.ndarray) -> None:
        """Adds a block of rows `[B, num_columns]`."""
        if len(rows) == 0:
            return
        rows = rows.astype(np.float64)
        present = ~np.isnan(rows)
        n_b = present.sum(axis=0).astype(np.float64)
        filled = np.where(present, rows, 0.0)
        mean_b = filled.sum(axis=0) / np.maximum(n_b, 1.0)
        m2_b = (np.where(present, rows - mean_b, 0.0) ** 2).sum(axis=0)
        self.merge(n_b, mean_b, m2_b)

    def merge(self, n_b: np.ndarray, mean_b: np.ndarray, m2_b: np.ndarray) -> None:
        """Adds the moments `(count, mean, M2)` of another block of rows (per column)."""
        total = self.count + n_b
        safe_total = np.maximum(total, 1.0)
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (n_b / safe_total)
        self.m2 = self.m2 + m2_b + delta ** 2 * (self.count * n_b / safe_total)
        self.count = total

    def std(self) -> np.ndarray:
        """Population standard deviation per column; constant columns get 1."""
        std = np.sqrt(self.m2 / np.maximum(self.count, 1.0))
        constant = std <= _CONSTANT_RELATIVE_STD * np.maximum(np.abs(self.mean), 1.0)
        return np.where(constant, 1.0, std)
