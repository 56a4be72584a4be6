"""The `images` pipeline on a folder of PNG/JPEG files, one sub-folder per class, end to end.

`kfdist run images --data FOLDER` on 3 classes of scikit-learn digits saved as PNG and JPEG
files in `train/<class>/` and `test/<class>/` (20 and 10 per class): the string class names
(the folders', in alphabetical order) go through the shard, train, evaluate and export steps.
The evaluation's confusion matrix and the export's `kfdist_export.json` name the classes, and
the exported `serving_default` signature, fed the test folder's own files, gives the classes
their folders name with the accuracy the evaluation reported.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from doc_shell_blocks import blocks_run_by, kfdist_commands
from fakes.image_files import DIGIT_CLASSES, write_image_folder

pytestmark = pytest.mark.slow
#: docs/guide/data.md's command, run on a generated `photos/` with RUN_ARGS added (a small folder).
[DOC_BLOCK] = blocks_run_by(__file__)
[DOC_COMMAND] = kfdist_commands(DOC_BLOCK)

CLASS_NAMES = sorted(DIGIT_CLASSES)
#: Small and quick: one replica, few epochs, batches that fit 60 training images.
RUN_ARGS = ("--strategy", "mirrored", "--epochs", "8", "--batch-size", "8",
            "--accuracy-threshold", "0.8")


@pytest.fixture(scope="module")
def folder_run(tmp_path_factory):
    cwd = str(tmp_path_factory.mktemp("folder-run"))
    root = os.path.join(cwd, DOC_COMMAND[DOC_COMMAND.index("--data") + 1])
    written = write_image_folder(root, per_class=20, splits=("train", "test"))
    out = os.path.join(cwd, DOC_COMMAND[DOC_COMMAND.index("--output") + 1])
    proc = subprocess.run([sys.executable, "-m", "kfdist", *DOC_COMMAND, *RUN_ARGS], cwd=cwd,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    return out, summary, [(p, n) for p, n in written if f"{os.sep}test{os.sep}" in p]


def test_the_folder_run_is_blessed_and_exported(folder_run):
    _, summary, _ = folder_run
    assert summary["pipeline"] == "images" and summary["blessed"] is True
    assert summary["eval"]["accuracy"] >= 0.8
    assert summary["export"]["exported"] is True


def test_the_evaluation_names_the_classes_by_their_folders(folder_run):
    out, _, test_files = folder_run
    [executor_output] = glob.glob(os.path.join(out, "pipeline_root", "*", "evaluate-model",
                                               "executor_output.json"))
    with open(executor_output) as f:
        artifacts = json.load(f)["artifacts"]
    [metrics] = artifacts["classification_metrics"]["artifacts"]
    matrix = metrics["metadata"]["confusionMatrix"]
    assert [spec["displayName"] for spec in matrix["annotationSpecs"]] == CLASS_NAMES
    assert sum(map(sum, (row["row"] for row in matrix["rows"]))) == len(test_files)


def test_the_export_serves_the_test_files_as_evaluated(folder_run):
    import tensorflow as tf

    _, summary, test_files = folder_run
    export = summary["export"]["path"]
    with open(os.path.join(export, "assets.extra", "kfdist_export.json")) as f:
        info = json.load(f)
    assert info["class_names"] == CLASS_NAMES
    serve = tf.saved_model.load(export).signatures["serving_default"]
    files = [tf.io.read_file(path) for path, _ in test_files]
    ids = serve(image_bytes=tf.stack(files))["class_ids"].numpy().tolist()
    predicted = [info["class_names"][i] for i in ids]
    correct = sum(p == name for p, (_, name) in zip(predicted, test_files))
    assert correct / len(test_files) == pytest.approx(summary["eval"]["accuracy"])
