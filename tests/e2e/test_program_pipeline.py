"""The `program` pipeline: the Keras example of examples/ as the training step, under kfp.local.

A subprocess runs the compiled pipeline's function with kfp.local's SubprocessRunner on the bundled
MNIST sample: shard → train_program (2 workers of the user's program) → evaluate → export. The
program's own SavedModel is evaluated and, blessed, exported; the export answers raw images.
"""

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples",
                       "keras_fit_backup_restore.py")
RUN = """
import json, sys
from kfp import local
from kfdist.pipelines.program import program_pipeline
from kfdist.sample_data import write_mnist_sample

out, example = sys.argv[1], sys.argv[2]
source = write_mnist_sample(out + "/data").get("path", out + "/data")
local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=out + "/pipeline_root",
           raise_on_error=True)
task = program_pipeline(source_uri=source, export_base=out + "/serving",
                        command=[sys.executable, example, "--epochs", "4"], workers=2,
                        accuracy_threshold=0.8)
print("BLESSED", json.dumps(task.outputs["blessed"]))
"""


@pytest.fixture(scope="module")
def program_run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("program"))
    proc = subprocess.run([sys.executable, "-c", RUN, out, os.path.abspath(EXAMPLE)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    return out, proc.stdout + proc.stderr


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
    assert "BLESSED true" in printed, printed[-3000:]
    with open(os.path.join(_step_dir(out, "evaluate-model"), "executor_output.json")) as f:
        evaluated = json.load(f)
    [metrics] = evaluated["artifacts"]["metrics"]["artifacts"]
    assert metrics["metadata"]["accuracy"] >= 0.8
    assert glob.glob(os.path.join(out, "serving", "program", "*", "saved_model.pb"))


def test_the_export_answers_raw_images(program_run):
    import tensorflow as tf

    from kfdist.components.common import dataset_spec, tf_features

    out, _ = program_run
    dataset_dir = os.path.join(_step_dir(out, "shard-dataset"), "dataset")
    meta = dataset_spec.load_metadata(dataset_dir)
    raw = tf.data.TFRecordDataset(meta.shard_paths(dataset_dir, "eval"),
                                  compression_type=tf_features.compression_type(meta))
    images, labels = next(iter(raw.batch(100_000).map(tf_features.parse_fn(meta))))
    [version] = glob.glob(os.path.join(out, "serving", "program", "*"))
    served = tf.saved_model.load(version)
    predicted = served.signatures["serving_default"](image=images)["class_ids"].numpy()
    assert np.mean(predicted == labels.numpy()) >= 0.8
