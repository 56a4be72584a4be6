"""Training and held-out accuracy that part: the rule, the evaluation's report and the console."""

from __future__ import annotations

import pytest

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.common.model_artifact import ReplicaReport, TrainingReport
from kfdist.components.evaluate_model.fit_gap import MAX_ACCURACY_GAP, accuracy_gap


@pytest.mark.parametrize("training, held_out, parted", [
    (1.0, 0.699, True),                          # the cars table with a 270-way one-hot
    (0.95, 0.95 - MAX_ACCURACY_GAP / 2, False),  # within the gap
    (0.80, 0.95, False),                         # held-out above training (dropout)
    (None, 0.7, False),                          # a program: no training accuracy recorded
])
def test_the_gap_is_called_out_only_beyond_the_limit(training, held_out, parted):
    line = accuracy_gap(training, held_out)
    assert (line is not None) == parted
    if parted:
        assert line.startswith(f"training accuracy {training:.3f} but held-out {held_out:.3f}: ")
        assert "overfitting" in line


def _training(final_accuracy: float) -> TrainingReport:
    return TrainingReport(backend="local", strategy="mirrored", workers=1, model_name="table_mlp",
                          epochs=40, final_loss=0.01, final_accuracy=final_accuracy,
                          examples_per_second=900.0, wall_seconds=3.0,
                          replicas=[ReplicaReport("worker:0", 1, 1, "0" * 64)])


def _evaluation(accuracy: float):
    from kfdist.components.evaluate_model.runtime import EvaluationResult

    return EvaluationResult(accuracy=accuracy, loss=1.2, num_examples=73,
                            confusion_matrix=[[30, 10], [12, 21]], class_names=["a", "b"],
                            blessed=False, reason="accuracy 0.699 < threshold 0.900",
                            threshold=0.9)


def test_the_report_says_when_training_and_held_out_accuracy_part():
    from kfdist.components.evaluate_model.report import render_report_html

    page = render_report_html(_evaluation(0.699), {}, _training(1.0))
    assert "<div class='warn'>Training accuracy 1.000 but held-out 0.699: " in page
    assert "Training accuracy" not in render_report_html(_evaluation(0.95), {}, _training(0.97))
    assert "Training accuracy" not in render_report_html(_evaluation(0.699), {}, None)


def test_the_console_says_so_and_names_the_report(tmp_path):
    from kfdist.run_summary import format_summary

    report = str(tmp_path / "report.html")
    summary = {"train": {"final_accuracy": 1.0}, "eval": {"accuracy": 0.699, "threshold": 0.9},
               "blessed": False, "export": {"exported": False, "reason": "not blessed"},
               "report": report, "wall_seconds": 1.0, "output_dir": str(tmp_path),
               "logs_dir": "logs"}
    shown = format_summary(summary).splitlines()
    assert "warning: training accuracy 1.000 but held-out 0.699: " in shown[1]
    assert f"evaluation report: {report}" in shown
    summary["train"]["final_accuracy"] = 0.71
    assert "warning" not in format_summary(summary)
