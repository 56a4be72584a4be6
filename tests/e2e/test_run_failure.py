"""A step that fails in `kfdist run`: its last lines on the console, where its whole log is, and
the run's record (`summary.json`, the data check's page) for a CI job to read."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow


def test_a_failing_training_step_shows_why_and_where_its_log_is(tmp_path):
    (tmp_path / "broken_models.py").write_text(textwrap.dedent("""
        def build(input_shape, num_classes):
            raise ValueError("broken_models.build: this model cannot be built")
    """))
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    proc = subprocess.run(
        [sys.executable, "-m", "kfdist", "run", "mnist", "--strategy", "mirrored", "--epochs", "1",
         "--model", "broken_models:build", "--output", str(out)],
        capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    shown = proc.stdout.splitlines()
    failed = next(i for i, line in enumerate(shown) if line.startswith("  train     FAILED after"))
    tail = shown[failed + 1:]
    assert any("this model cannot be built" in line for line in tail), proc.stdout
    log = out / "logs" / "train.log"
    assert f"  whole log: {log}" in tail
    assert "this model cannot be built" in log.read_text()
    assert "kfdist: error: pipeline 'mnist' failed in train: " in proc.stderr
    assert str(log) in proc.stderr and "\x1b[" not in proc.stderr
    assert len(proc.stdout.splitlines()) < 60
    summary = json.loads((out / "summary.json").read_text())  # a CI job's file to read
    assert summary["status"] == "failed" and summary["run_id"].startswith("kfdist-mnist-")
    assert summary["steps"] == {"shard": "succeeded", "train": "failed", "evaluate": "not run",
                                "export": "not run"}
    assert summary["failure"]["step"] == "train" and summary["failure"]["log"] == str(log)
    assert "this model cannot be built" in summary["failure"]["error"]
    assert not [line for line in tail if '"outputFile"' in line or "KFP Executor" in line]


def test_a_program_trained_on_other_data_fails_in_training_in_one_line(tmp_path):
    program = tmp_path / "other_data.py"
    program.write_text(textwrap.dedent("""
        import os
        os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
        import numpy as np
        import tensorflow as tf
        from kfdist import program
        model = tf.keras.Sequential([tf.keras.Input(shape=(4,)),
                                     tf.keras.layers.Dense(3, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        model.fit(np.random.rand(32, 4), np.random.randint(0, 3, 32), epochs=1, verbose=2)
        model.save(program.model_dir())
    """))
    out = tmp_path / "run"
    out.mkdir()
    for earlier in ("summary.json", "report.html"):  # an earlier run's, in the same directory
        (out / earlier).write_text("{}")
    proc = subprocess.run(
        [sys.executable, "-m", "kfdist", "run", "program", "--command",
         f"{sys.executable} {program}", "--workers", "1", "--output", str(out)],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    shown = proc.stdout.splitlines()
    assert any(line.startswith("  train-program FAILED after") for line in shown), proc.stdout
    [reason] = [line for line in shown if "does not fit the dataset" in line]
    assert reason.startswith("    TrainingFailedError: the program's SavedModel (")
    assert ("it takes 'input_1' float32 [batch, 4]; the dataset holds 28x28 images, fed to the "
            "model as float32 [batch, 28, 28]") in reason
    assert not [line for line in shown if "Traceback" in line or line.startswith("      File ")]
    assert "  evaluate  not run: an earlier step failed" in shown
    assert "  export    not run: an earlier step failed" in shown
    assert "condition-" not in proc.stdout + proc.stderr
    assert ("kfdist: error: pipeline 'program' failed in train-program: TrainingFailedError: "
            "the program's SavedModel (") in proc.stderr
    assert not (out / "report.html").exists()  # the earlier run's is gone, this run has none
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["failure"]["step"] == "train-program"
    assert summary["failure"]["error"] == reason.strip()


def test_a_run_the_data_check_stops_leaves_its_summary_and_data_report(tmp_path):
    """scikit-learn's wine table: the reference has every column, the new table lost one."""
    from sklearn.datasets import load_wine

    from kfdist.components.shard_dataset import runtime

    table = load_wine(as_frame=True).frame
    table.to_csv(tmp_path / "wine.csv", index=False)
    runtime.shard(str(tmp_path / "wine.csv"), str(tmp_path / "reference"), label_column="target",
                  num_shards=2, log=lambda _: None)
    data = tmp_path / "wine-2025.csv"
    table.drop(columns=["proline"]).to_csv(data, index=False)
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "kfdist", "run", "tabular", "--data", str(data), "--label-column",
         "target", "--reference-dataset", str(tmp_path / "reference"), "--output", str(out)],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    shown = proc.stdout.splitlines()
    assert shown[1] == (f"serving name: wine-2025 (after the data; --serving-model-name sets "
                        f"another), under {out / 'serving'}")
    failed = next(i for i, line in enumerate(shown) if line.startswith("  shard     FAILED after"))
    # The step's own lines, not kfp's JSON: the name it serves under, then what it read.
    assert shown[failed + 1] == "    serving name: wine-2025 (serving_model_name)"
    assert shown[failed + 2].startswith("    source ")
    assert not [line for line in shown if '"outputFile"' in line or "KFP Executor" in line]
    report = out / "data_report.html"
    assert f"data report: {report}" in shown
    assert f"summary: {out / 'summary.json'}" in shown[-1]
    page = report.read_text()
    assert "<h1>Data validation</h1>" in page and "proline" in page
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["data_report"] == str(report)
    assert summary["steps"] == {"shard": "failed", "train": "not run", "evaluate": "not run",
                                "export": "not run"}
    assert summary["failure"]["step"] == "shard"
    assert summary["failure"]["error"].startswith("DataAnomalyError: 1 anomaly in the data")
    assert summary["failure"]["log"] == str(out / "logs" / "shard.log")
    assert any("proline" in line for line in summary["failure"]["last_lines"])
    [run_dir] = os.listdir(out / "pipeline_root" / summary["run_id"])  # the run's own folder
    assert run_dir == "shard-dataset" and summary["model_name"] == "wine-2025"
