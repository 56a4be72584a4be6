"""A regression's evaluation: RMSE, MAE and R² on the held-out split, and its blessing.

`evaluate` (`runtime`) hands the eval split's predicted numbers here when the
model was trained on a regression's dataset. The blessing is
`verdict.decide_regression`: the RMSE must not exceed `rmse_threshold` (0: the
RMSE of predicting the train split's mean label for every held-out example),
and not be higher than the served model's by more than `min_improvement`
allows. The step's `metrics` (`metric_values`) and the blessing's record
(`verdict_record`) carry the same figures.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Callable, Dict, List, Optional

import numpy as np

from kfdist.components.common import dataset_spec as ds
from kfdist.components.common import eval_predictions as ep
from kfdist.components.evaluate_model import slices as sl
from kfdist.components.evaluate_model import verdict as vd
from kfdist.components.evaluate_model.regression_metrics import (
    errors_of, mean_baseline_rmse)

#: Points the report's plots draw at most (an even sample of a larger split).
PLOTTED_POINTS = 5_000


@dataclasses.dataclass(frozen=True)
class RegressionEvaluation:
    """Outcome of evaluating a regression's model on a dataset's eval split.

    Attributes:
      rmse: Root mean squared error, in the label's units.
      mae: Mean absolute error.
      r2: Coefficient of determination (None: the held-out labels are all equal).
      loss: The mean squared error (the training loss).
      num_examples: Eval examples scored.
      blessed: Whether the model is blessed (`verdict.decide_regression`).
      reason: The verdict, one line.
      threshold: The RMSE it had to reach or beat.
      baseline_rmse: The RMSE of predicting the train split's mean label.
      label_column: The label's column.
      labels: Held-out labels for the report's plots (at most `PLOTTED_POINTS`).
      predicted: The model's predictions for those labels.
      slices: The metrics of each slice of the `slice_columns` (`SliceMetrics.rmse`).
      served: The served model, compared or not; None when none is served.
      served_root: Where a served model was looked for (empty: no export base).
      min_improvement: The share by which the RMSE had to fall below the served model's.
      allow_class_change: Whether a served model with other outputs could be replaced.
      excluded_columns: Source columns left out of the dataset, each with why.
      data_source: Where the evaluated dataset's examples came from.
      task: `regression`.
    """

    rmse: float
    mae: float
    r2: Optional[float]
    loss: float
    num_examples: int
    blessed: bool
    reason: str
    threshold: float
    baseline_rmse: float
    label_column: Optional[str] = None
    labels: List[float] = dataclasses.field(default_factory=list)
    predicted: List[float] = dataclasses.field(default_factory=list)
    slices: List[sl.SliceMetrics] = dataclasses.field(default_factory=list)
    served: Optional[vd.ServedModel] = None
    served_root: str = ""
    min_improvement: float = vd.MIN_IMPROVEMENT
    allow_class_change: bool = vd.ALLOW_CLASS_CHANGE
    excluded_columns: List[str] = dataclasses.field(default_factory=list)
    data_source: Optional[str] = None
    task: str = ds.REGRESSION

    @property
    def rmse_change(self) -> Optional[float]:
        """The RMSE minus the served model's, when it was compared."""
        served = self.served
        compared = served is not None and served.compared and served.rmse is not None
        return self.rmse - served.rmse if compared else None

    def to_json(self) -> str:
        """Serialises to JSON (for a Metrics/JSON artifact)."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)


def _plotted(scored: ep.EvalPredictions) -> np.ndarray:
    """The positions of the examples the plots draw: all, or an even sample."""
    count = len(scored.labels)
    if count <= PLOTTED_POINTS:
        return np.arange(count)
    return np.linspace(0, count - 1, PLOTTED_POINTS).astype(np.int64)


def regression_result(scored: ep.EvalPredictions, model_meta: ds.DatasetMetadata,
                      data_meta: ds.DatasetMetadata, rmse_threshold: float,
                      log: Callable[[str], None], *, served: Optional[vd.ServedModel],
                      served_root: str, min_improvement: float, allow_class_change: bool,
                      slices: List[sl.SliceMetrics]) -> RegressionEvaluation:
    """The metrics and the verdict from the eval split's predicted numbers.

    Args:
      scored: The predictions (`EvalPredictions.is_regression`).
      model_meta: The metadata the model was trained with (its train label mean).
      data_meta: The evaluated dataset's.
      rmse_threshold: The highest RMSE blessed; 0: the RMSE of predicting the train mean.
      log: Receives the verdict's line.
      served: The served model, compared or not; None when none is served.
      served_root: Where a served model was looked for.
      min_improvement: See `verdict.decide_regression`.
      allow_class_change: See `verdict.decide_regression`.
      slices: The slices' metrics.
    """
    errors = errors_of(scored.labels, scored.predicted)
    train = (model_meta.label_statistics or {}).get(ds.SPLITS[0])
    baseline = mean_baseline_rmse(scored.labels, train.mean if train else
                                  float(np.mean(scored.labels)))
    threshold = float(rmse_threshold) or baseline
    blessed, reason = vd.decide_regression(
        errors.rmse, threshold, served=served, served_root=served_root,
        min_improvement=min_improvement, allow_class_change=allow_class_change,
        baseline=not rmse_threshold)
    r2 = "–" if errors.r2 is None else f"{errors.r2:.4f}"
    log(f"rmse={errors.rmse:.4f} mae={errors.mae:.4f} r2={r2} over {errors.examples} "
        f"examples; {'blessed' if blessed else 'not blessed'}: {reason}")
    shown = _plotted(scored)
    return RegressionEvaluation(
        rmse=errors.rmse, mae=errors.mae, r2=errors.r2, loss=errors.rmse ** 2,
        num_examples=errors.examples, blessed=blessed, reason=reason, threshold=threshold,
        baseline_rmse=baseline, label_column=model_meta.label_column,
        labels=scored.labels[shown].astype(float).tolist(),
        predicted=scored.predicted[shown].astype(float).tolist(), slices=slices,
        served=served, served_root=served_root, min_improvement=min_improvement,
        allow_class_change=allow_class_change,
        excluded_columns=[c.describe() for c in data_meta.excluded_columns or ()],
        data_source=data_meta.source_uri)


def metric_values(result: RegressionEvaluation) -> Dict[str, float]:
    """The step's `metrics`: `rmse`, `mae`, `r2`, `loss` (the MSE), `eval_examples`,
    `rmse_threshold`, the slices' `rmse[column=value]` and `eval_examples[column=value]`;
    with a compared served model `served_rmse`, `served_mae`, `rmse_change` and
    `served_version`."""
    values = {"rmse": result.rmse, "mae": result.mae, "loss": result.loss,
              "eval_examples": result.num_examples, "rmse_threshold": result.threshold,
              **({"r2": result.r2} if result.r2 is not None else {}),
              **sl.metric_values(result.slices, regression=True)}
    served = result.served
    if served is not None and served.compared and served.rmse is not None:
        values.update(served_rmse=served.rmse, served_mae=served.mae,
                      rmse_change=result.rmse_change, served_version=served.version)
    return values


def verdict_record(result: RegressionEvaluation) -> Dict[str, object]:
    """The blessing's record: the verdict, its figures and the served model's."""
    record: Dict[str, object] = {
        "blessed": result.blessed, "reason": result.reason, "task": result.task,
        "rmse": result.rmse, "mae": result.mae, "r2": result.r2,
        "threshold": result.threshold}
    served = result.served
    if served is None:
        return record
    if not served.compared:
        return {**record, "served_path": served.path, "served_not_compared": served.mismatch,
                **({"served_class_change": True} if served.class_change else {})}
    return {**record, "served_path": served.path, "served_version": served.version,
            "served_rmse": served.rmse, "rmse_change": result.rmse_change,
            "min_improvement": result.min_improvement}
