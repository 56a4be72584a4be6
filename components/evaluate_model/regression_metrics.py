"""A regression's held-out figures: RMSE, MAE and R², and the error of predicting the mean.

Pure numpy over the eval split's predictions (`eval_predictions.EvalPredictions`
of numbers): what the evaluation reports, blesses on (`verdict.decide_regression`)
and slices by (`slices`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np


@dataclasses.dataclass(frozen=True)
class RegressionMetrics:
    """Errors of predicted numbers against the labels.

    Attributes:
      rmse: Root mean squared error, in the label's units.
      mae: Mean absolute error, in the label's units.
      r2: Coefficient of determination (1: perfect; 0: as good as predicting the labels'
        own mean); None for fewer than two distinct labels.
      examples: The examples scored.
    """

    rmse: float
    mae: float
    r2: Optional[float]
    examples: int


def errors_of(labels: np.ndarray, predicted: np.ndarray) -> RegressionMetrics:
    """RMSE, MAE and R² of `predicted` against `labels` (both `[N]`, N ≥ 1)."""
    labels = labels.astype(np.float64).reshape(-1)
    residuals = predicted.astype(np.float64).reshape(-1) - labels
    squared = float(np.mean(residuals ** 2))
    spread = float(np.sum((labels - labels.mean()) ** 2))
    r2 = 1.0 - float(np.sum(residuals ** 2)) / spread if spread > 0 else None
    return RegressionMetrics(rmse=math.sqrt(squared), mae=float(np.mean(np.abs(residuals))),
                             r2=r2, examples=int(len(labels)))


def regression_metrics(scored) -> RegressionMetrics:
    """The metrics of a regression's `EvalPredictions`."""
    return errors_of(scored.labels, scored.predicted)


def mean_baseline_rmse(labels: np.ndarray, train_mean: float) -> float:
    """The RMSE of predicting the train split's mean label for every example."""
    return float(np.sqrt(np.mean((labels.astype(np.float64) - train_mean) ** 2)))
