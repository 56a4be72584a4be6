"""A regressor trains under every strategy, through `kfdist train`, on scikit-learn's diabetes.

`mirrored` runs end to end in tests/e2e/test_regression_run.py; here `parameter_server`
(2 workers, 1 PS, a side-car evaluator), `horovod` (`mpirun`, 2 ranks) and
`multi_worker_mirrored` (2 workers) each train the default model on the table's `target`
(a number: 214 distinct values) with early stopping, and the held-out RMSE beats predicting
the train mean. `kfdist train` prints the held-out RMSE, MAE and R².
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest
import sklearn.datasets

from kfdist.cli import main as kfdist_main
from kfdist.components.common import model_artifact
from kfdist.components.common.dataset_spec import REGRESSION
from kfdist.components.shard_dataset import runtime


@pytest.fixture(scope="module")
def diabetes_dataset(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("diabetes")
    sklearn.datasets.load_diabetes(as_frame=True).frame.to_csv(root / "d.csv", index=False)
    meta = runtime.shard(str(root / "d.csv"), str(root / "dataset"), label_column="target",
                         num_shards=4, log=lambda line: None)
    assert meta.task == REGRESSION
    return str(root / "dataset")


@pytest.mark.parametrize("strategy, flags", [
    ("parameter_server", ["--workers", "2", "--ps", "1", "--evaluator"]),
    ("horovod", ["--workers", "2", "--restart-policy", "OnFailure"]),
    ("multi_worker_mirrored", ["--workers", "2"]),
])
def test_a_regressor_trains_under_every_strategy(strategy, flags, diabetes_dataset,
                                                  tmp_path):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = kfdist_main(["train", "--dataset", diabetes_dataset, "--output", str(tmp_path),
                            "--strategy", strategy, *flags, "--epochs", "12",
                            "--batch-size", "32", "--learning-rate", "0.01"])
    assert code == 0, printed.getvalue()[-3000:]
    with open(tmp_path / "train-summary.json") as f:
        summary = json.load(f)
    held_out = summary["eval"]
    meta = json.loads((tmp_path / "model" / model_artifact.DATASET_METADATA_FILE).read_text())
    mean = meta["label_statistics"]["train"]["mean"]
    eval_stats = meta["label_statistics"]["eval"]
    # The RMSE of predicting the train mean for every held-out example.
    baseline = (eval_stats["std"] ** 2 + (eval_stats["mean"] - mean) ** 2) ** 0.5
    assert "accuracy" not in held_out and held_out["rmse"] < 0.9 * baseline
    assert 0 < held_out["mae"] <= held_out["rmse"] and held_out["r2"] > 0.1
    report = model_artifact.read_training_report(str(tmp_path / "model"))
    assert report.strategy == strategy and report.final_rmse > 0
    assert report.final_accuracy is None
