"""A regression's model, evaluation, blessing, report and summary, on real predictions.

The numbers are scikit-learn's diabetes targets and a least-squares fit of the table's
columns (the figures a regressor reaches), so every metric is checked against
scikit-learn's own.
"""

from __future__ import annotations

import numpy as np
import pytest
import sklearn.datasets
import sklearn.linear_model
import sklearn.metrics

from kfdist.components.common import dataset_spec as ds
from kfdist.components.common.model_artifact import TrainingReport
from kfdist.components.common.eval_predictions import EvalPredictions, score
from kfdist.components.evaluate_model import regression_eval, slices
from kfdist.components.evaluate_model.regression_metrics import errors_of, mean_baseline_rmse
from kfdist.components.evaluate_model.regression_report import (
    PREDICTED_PLOT, RESIDUALS_PLOT, render_regression_html, render_regression_markdown)
from kfdist.components.evaluate_model.verdict import (
    ServedModel, check_rmse_threshold, decide_regression)
from kfdist.regression_summary import eval_record, verdict_lines
from kfdist.step_figures import step_figure

SERVED = ServedModel(path="/srv/models/diabetes/1700000000", version=1700000000, rmse=60.0,
                     mae=48.0, loss=3600.0)


@pytest.fixture(scope="module")
def fitted():
    """Held-out diabetes targets and a linear model's predictions of them."""
    frame = sklearn.datasets.load_diabetes(as_frame=True).frame
    train, held_out = frame.iloc[:350], frame.iloc[350:]
    columns = [c for c in frame.columns if c != "target"]
    fit = sklearn.linear_model.LinearRegression().fit(train[columns], train["target"])
    return (held_out["target"].to_numpy(np.float32),
            fit.predict(held_out[columns]).astype(np.float32), float(train["target"].mean()),
            held_out["sex"].to_numpy(np.float32))


def _meta(train_mean: float) -> ds.DatasetMetadata:
    stats = ds.LabelStatistics(mean=train_mean, std=77.0, min=25.0, max=346.0, examples=350)
    return ds.DatasetMetadata(
        source_uri="diabetes.csv", source_format="csv",
        feature=ds.FeatureSpec(key="features", dtype="float32", shape=(10,)), num_classes=0,
        preprocessing=ds.Preprocessing(kind="standardize"), compression=None, seed=42,
        eval_fraction=0.2, splits={}, label_column="target", task=ds.REGRESSION,
        label_statistics={"train": stats})


def test_rmse_mae_and_r2_are_scikit_learns(fitted):
    labels, predicted, _, _ = fitted
    errors = errors_of(labels, predicted)
    rmse = float(np.sqrt(sklearn.metrics.mean_squared_error(labels, predicted)))
    assert errors.rmse == pytest.approx(rmse, rel=1e-6)
    assert errors.mae == pytest.approx(sklearn.metrics.mean_absolute_error(labels, predicted),
                                       rel=1e-6)
    assert errors.r2 == pytest.approx(sklearn.metrics.r2_score(labels, predicted), rel=1e-5)
    scored = EvalPredictions.from_values(labels, predicted.reshape(-1, 1))
    assert scored.is_regression and score(scored) == pytest.approx(rmse, rel=1e-6)
    assert errors_of(np.full(3, 5.0), np.array([4.0, 5.0, 6.0])).r2 is None  # no spread


@pytest.mark.parametrize("rmse, min_improvement, blessed", [
    (55.0, 0.0, True),     # lower
    (60.0, 0.0, True),     # equal: not worse
    (61.0, 0.0, False),    # higher
    (57.0, 0.1, False),    # 5% lower, 10% asked
    (54.0, 0.1, True),     # 10% lower: exactly enough
    (62.0, -0.05, True),   # within the tolerance
    (69.0, -1.0, True),    # -1: the threshold alone
])
def test_a_regression_is_never_worse_than_the_served_one(rmse, min_improvement, blessed):
    verdict, reason = decide_regression(rmse, 70.0, served=SERVED,
                                        min_improvement=min_improvement,
                                        allow_class_change=False)
    assert verdict is blessed
    assert "the served version 1700000000 has RMSE 60.000 on the same examples" in reason
    assert ("not good enough to replace it" in reason) is (not blessed)


def test_the_rmse_threshold_is_lower_is_better_and_checked():
    assert decide_regression(71.0, 70.0, allow_class_change=False) == (
        False, "RMSE 71.000 > threshold 70.000; no served model (no export base given) to "
               "compare with")
    blessed, reason = decide_regression(65.0, 70.0, served=SERVED, allow_class_change=False,
                                        baseline=True)
    assert not blessed and reason.startswith("RMSE 65.000 ≤ threshold 70.000 (predicting the "
                                             "train mean)")
    classes = ServedModel(path="/srv/m/1", version=1, mismatch="it predicts classes",
                          class_change=True)
    assert decide_regression(10.0, 70.0, served=classes, allow_class_change=False)[0] is False
    assert decide_regression(10.0, 70.0, served=classes, allow_class_change=True)[0] is True
    for bad in (-1.0, "70", True):
        with pytest.raises(Exception, match="rmse_threshold="):
            check_rmse_threshold(bad)


def test_the_evaluation_blesses_on_the_mean_by_default_and_reports_slices(fitted):
    labels, predicted, train_mean, sex = fitted
    scored = EvalPredictions.from_values(labels, predicted)
    sliced = slices.compute({"sex": sex}, scored)
    result = regression_eval.regression_result(
        scored, _meta(train_mean), _meta(train_mean), 0.0, lambda line: None, served=None,
        served_root="", min_improvement=0.0, allow_class_change=False, slices=sliced)
    assert result.threshold == pytest.approx(mean_baseline_rmse(labels, train_mean))
    assert result.blessed and result.rmse < result.threshold
    assert [s.examples for s in sliced] and sum(s.examples for s in sliced) == len(labels)
    # Each slice's RMSE is that of its own examples (sex holds two values).
    own = {int((sex == v).sum()): errors_of(labels[sex == v], predicted[sex == v]).rmse
           for v in np.unique(sex)}
    assert len(sliced) == 2
    assert all(s.rmse == pytest.approx(own[s.examples], rel=1e-5) for s in sliced)
    values = regression_eval.metric_values(result)
    assert {"rmse", "mae", "r2", "loss", "eval_examples", "rmse_threshold"} <= set(values)
    assert all(name.startswith(("rmse[", "eval_examples[")) for name in values if "[" in name)
    assert "accuracy" not in values
    record = regression_eval.verdict_record(result)
    assert record["task"] == ds.REGRESSION and record["blessed"] is True
    summary = eval_record(values, record, {})
    assert summary["slices"] and all("rmse" in s for s in summary["slices"].values())
    [headline, worst] = verdict_lines(summary, blessed=True)
    assert headline.startswith(f"held-out RMSE {result.rmse:.4f}, MAE {result.mae:.4f}, R² ")
    assert headline.endswith(": blessed") and worst.startswith("highest-RMSE slice: sex=")


def test_the_report_plots_predictions_and_residuals_and_names_no_classes(fitted):
    labels, predicted, train_mean, _ = fitted
    scored = EvalPredictions.from_values(labels, predicted)
    result = regression_eval.regression_result(
        scored, _meta(train_mean), _meta(train_mean), 70.0, lambda line: None,
        served=SERVED, served_root="/srv/models/diabetes", min_improvement=0.0,
        allow_class_change=False, slices=[])
    training = TrainingReport(
        backend="local", strategy="mirrored", workers=1, model_name="tabular_mlp", epochs=18,
        final_loss=1866.4, final_accuracy=None, examples_per_second=496.0, wall_seconds=10.5,
        replicas=[], kept_epoch=13, epochs_planned=30, early_stopping_patience=5,
        kept_validation_loss=2404.4, final_rmse=44.26)
    page = render_regression_html(result, {"loss": [4000.0, 3000.0], "rmse": [63.0, 55.0],
                                           "val_rmse": [60.0, 58.0]}, training)
    for alt in (PREDICTED_PLOT, RESIDUALS_PLOT, "training curves"):
        assert f'<img alt="{alt}" src="data:image/png;base64,' in page
    assert "The model holds the weights of epoch 13" in page
    assert "<td>training RMSE (epoch kept)</td><td>44.26</td>" in page
    assert "confusion" not in page and "accuracy" not in page
    assert "<td>RMSE</td>" in page  # beside the served model's
    markdown = render_regression_markdown(result)
    assert f"| RMSE | {result.rmse:.4f} |" in markdown and "served RMSE" in markdown


def test_the_console_says_the_training_rmse():
    metrics = {"final_loss": 1866.4, "final_rmse": 44.26, "final_val_rmse": 61.23,
               "examples_per_second": 496.0, "training_seconds": 10.5}
    line = step_figure("train", {"metrics": metrics}, epochs=18)
    assert "training RMSE 44.2600, held-out 61.2300" in line and "accuracy" not in line


def test_training_curves_of_a_regression_have_an_rmse_panel():
    from kfdist.components.evaluate_model.curves import CURVES

    assert [key for key, _ in CURVES["rmse"]] == ["rmse", "selection_rmse", "val_rmse"]
