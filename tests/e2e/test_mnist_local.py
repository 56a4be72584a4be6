"""The README's main command, end to end: `kfdist run mnist --workers 2`.

Runs the real CLI in a subprocess (kfp.local → 4 step subprocesses → 2 training
replicas), then checks what a user would: held-out accuracy, the exported
model's serving signature on raw images agreeing with evaluation, and summary.json.
"""

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import doc_shell_blocks

pytestmark = pytest.mark.slow


def _step_output(run_root: str, step: str) -> dict:
    """The executor output a kfp.local step wrote (artifact metadata included)."""
    [path] = glob.glob(os.path.join(run_root, "pipeline_root", "*", step, "executor_output.json"))
    with open(path) as f:
        return json.load(f)


def _step_dir(run_root: str, step: str) -> str:
    [path] = glob.glob(os.path.join(run_root, "pipeline_root", "*", step))
    return path


def _readme_main_command() -> list:
    """The arguments after `kfdist` of the README's first set-up command (README.md)."""
    [block] = [b for b in doc_shell_blocks.blocks_run_by(__file__) if b.doc == "README.md"]
    return doc_shell_blocks.kfdist_commands(block)[0]


def test_the_readme_main_command_is_the_one_run_here():
    assert _readme_main_command()[:4] == ["run", "mnist", "--workers", "2"]


@pytest.fixture(scope="module")
def temp_dir(tmp_path_factory):
    """The run's TMPDIR."""
    return tmp_path_factory.mktemp("tmp")


@pytest.fixture(scope="module")
def mnist_run(tmp_path_factory, temp_dir):
    out = str(tmp_path_factory.mktemp("run"))
    args = _readme_main_command()
    args[args.index("--output") + 1] = out
    proc = subprocess.run([sys.executable, "-m", "kfdist", *args], env=dict(
        os.environ, TMPDIR=str(temp_dir)), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    with open(os.path.join(out, "summary.json")) as f:
        return out, json.load(f), proc.stdout + proc.stderr


def test_the_run_leaves_nothing_in_the_temporary_directory(mnist_run, temp_dir):
    """Not the steps' code (kfp.local writes each to a directory of its own there) nor the
    replicas' AutoGraph modules; only the machine-wide port lock directory, empty."""
    left = {p.name: sorted(c.name for c in p.iterdir()) if p.is_dir() else None
            for p in temp_dir.iterdir()}
    assert left in ({}, {"kfdist-ports": []}), left


def test_summary_reports_distributed_training_and_accuracy(mnist_run):
    _, summary, _ = mnist_run
    assert summary["train"]["workers"] == 2
    assert summary["eval"]["accuracy"] >= 0.90
    assert summary["blessed"] is True
    assert os.path.isdir(summary["export"]["path"])
    assert summary["wall_seconds"] > 0


def test_every_worker_streams_into_the_training_step_log(mnist_run):
    out, _, printed = mnist_run
    with open(os.path.join(out, "logs", "train.log")) as f:
        log = f.read()
    assert "[worker-0]" in log and "[worker-1]" in log
    assert "[worker-0]" not in printed  # the console shows the step's line and progress only


def test_the_console_shows_a_line_per_step_and_a_short_summary(mnist_run):
    out, summary, printed = mnist_run
    lines = printed.splitlines()
    assert len(lines) < 60, printed
    for step in ("shard", "train", "evaluate", "export"):
        assert any(line.startswith(f"  {step:<9} done in ") for line in lines), printed
    assert any(line.startswith("  train     [####################] epoch 10/10") for line in lines)
    assert f"model exported to {summary['export']['path']}" in lines
    assert not [line for line in lines if "KFP Executor" in line or "executor_input" in line]


def test_export_predicts_the_classes_evaluation_counted(mnist_run):
    import tensorflow as tf

    from kfdist.components.common import dataset_spec, tf_features

    out, summary, _ = mnist_run
    dataset_dir = os.path.join(_step_dir(out, "shard-dataset"), "dataset")
    meta = dataset_spec.load_metadata(dataset_dir)
    raw = tf.data.TFRecordDataset(meta.shard_paths(dataset_dir, "eval"),
                                  compression_type=tf_features.compression_type(meta))
    images, labels = next(iter(raw.batch(100_000).map(tf_features.parse_fn(meta))))
    assert images.dtype == tf.uint8 and images.shape[1:] == (28, 28)

    served = tf.saved_model.load(summary["export"]["path"])
    outputs = served.signatures["serving_default"](image=images)
    predicted = outputs["class_ids"].numpy()
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(axis=1), 1.0, rtol=1e-5)

    evaluated = _step_output(out, "evaluate-model")["artifacts"]["classification_metrics"]
    rows = evaluated["artifacts"][0]["metadata"]["confusionMatrix"]["rows"]
    counted = np.array([r["row"] for r in rows], dtype=np.int64)
    served_matrix = np.zeros((meta.num_classes, meta.num_classes), dtype=np.int64)
    np.add.at(served_matrix, (labels.numpy(), predicted), 1)
    np.testing.assert_array_equal(served_matrix, counted)
    assert np.trace(served_matrix) / len(predicted) == pytest.approx(summary["eval"]["accuracy"])
