"""`kfdist run program`: the Keras example of examples/ as the pipeline's training step.

The real CLI in a subprocess runs the program pipeline with kfp.local on the bundled MNIST sample:
shard → train_program (2 workers of the user's program) → evaluate → export. The program's own
SavedModel is evaluated and, blessed, exported; the export answers raw images.
"""

import glob
import json
import os
import shlex
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples",
                       "keras_fit_backup_restore.py")


@pytest.fixture(scope="module")
def program_run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("program"))
    command = shlex.join([sys.executable, os.path.abspath(EXAMPLE), "--epochs", "4"])
    proc = subprocess.run([sys.executable, "-m", "kfdist", "run", "program", "--command", command,
                           "--workers", "2", "--accuracy-threshold", "0.8", "--output", out],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    with open(os.path.join(out, "logs", "train-program.log")) as f:
        return out, proc.stdout + f.read()


def _step_dir(out: str, step: str) -> str:
    [path] = glob.glob(os.path.join(out, "pipeline_root", "*", step))
    return path


def test_every_replica_ran_the_program_and_the_model_artifact_is_complete(program_run):
    out, printed = program_run
    assert "[worker-0] Epoch 4/4" in printed and "[worker-1] Epoch 4/4" in printed
    [model] = glob.glob(os.path.join(_step_dir(out, "train-program"), "model"))
    assert sorted(os.listdir(model)) == ["checkpoints", "dataset_metadata.json",
                                         "program_report.json", "saved_model", "serving_model"]
    with open(os.path.join(model, "program_report.json")) as f:
        report = json.load(f)
    assert report["replicas"] == 2 and report["restarts"] == 0 and report["serving_model"]


def test_the_program_model_is_evaluated_blessed_and_exported(program_run):
    out, printed = program_run
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    assert summary["blessed"] is True and summary["eval"]["accuracy"] >= 0.8, summary
    assert summary["train"]["framework"] == "tensorflow" and summary["train"]["workers"] == 2
    with open(os.path.join(_step_dir(out, "evaluate-model"), "executor_output.json")) as f:
        evaluated = json.load(f)
    [metrics] = evaluated["artifacts"]["metrics"]["artifacts"]
    assert metrics["metadata"]["accuracy"] >= 0.8
    assert glob.glob(os.path.join(out, "serving", "mnist", "*", "saved_model.pb"))


def test_the_summary_names_the_run_the_model_every_step_and_the_report(program_run):
    out, printed = program_run
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    [run_dir] = glob.glob(os.path.join(out, "pipeline_root", "*"))
    assert summary["run_id"] == os.path.basename(run_dir)
    assert summary["model_name"] == "mnist"  # after the data: the bundled MNIST sample
    assert summary["steps"] == {"shard": "succeeded", "train-program": "succeeded",
                                "evaluate": "succeeded", "export": "succeeded"}
    report = os.path.join(out, "report.html")
    assert summary["report"] == report and f"evaluation report: {report}" in printed
    with open(report) as f:
        page = f.read()
    assert "<h1>Model evaluation</h1>" in page
    assert f"<p>run <b>{summary['run_id']}</b> · data <b>{summary['data']}</b></p>" in page
    data_report = os.path.join(out, "data_report.html")
    assert summary["data_report"] == data_report and f"data report: {data_report}" in printed
    assert summary["status"] == "succeeded" and summary["failure"] is None


def test_the_export_answers_raw_images(program_run):
    import tensorflow as tf

    from kfdist.components.common import dataset_spec, tf_features

    out, _ = program_run
    dataset_dir = os.path.join(_step_dir(out, "shard-dataset"), "dataset")
    meta = dataset_spec.load_metadata(dataset_dir)
    raw = tf.data.TFRecordDataset(meta.shard_paths(dataset_dir, "eval"),
                                  compression_type=tf_features.compression_type(meta))
    images, labels = next(iter(raw.batch(100_000).map(tf_features.parse_fn(meta))))
    [version] = glob.glob(os.path.join(out, "serving", "mnist", "*"))
    served = tf.saved_model.load(version)
    predicted = served.signatures["serving_default"](image=images)["class_ids"].numpy()
    assert np.mean(predicted == labels.numpy()) >= 0.8
