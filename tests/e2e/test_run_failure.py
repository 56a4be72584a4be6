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
