"""A step that fails in `kfdist run`: its last lines on the console, and where its whole log is."""

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
    assert not (out / "summary.json").exists()


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
    assert not (out / "summary.json").exists() and not (out / "report.html").exists()
