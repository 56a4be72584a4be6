"""A folder of images smaller than one global batch trains as it is, and the run says so.

`kfdist run images` on 160 PNG/JPEG digits of 4 classes, 30 % held out, at the default
`--batch-size` (64) and 2 workers: the train split holds fewer than 64 x 2 examples, so the
training step lowers the batch to the largest that makes one step, as Keras would train one
partial batch, instead of refusing the run; the console's train line names the flag a person
types.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from fakes.image_files import write_image_folder

pytestmark = pytest.mark.slow

CLASSES = {"zero": 0, "one": 1, "four": 4, "seven": 7}
WORKERS = 2


def test_a_train_split_smaller_than_one_global_batch_trains_with_a_lowered_batch(tmp_path):
    written = write_image_folder(str(tmp_path / "photos"), per_class=40, classes=CLASSES)
    assert len(written) == 160
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "kfdist", "run", "images", "--data", str(tmp_path / "photos"),
         "--eval-fraction", "0.3", "--workers", str(WORKERS), "--epochs", "2",
         "--accuracy-threshold", "0", "--output", str(out),
         # The whole train split trains: no validation part is set aside for early stopping.
         "--early-stopping-patience", "0"],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    [metadata] = glob.glob(str(out / "pipeline_root" / "*" / "shard-dataset" / "dataset" /
                               "metadata.json"))
    with open(metadata) as f:
        train = json.load(f)["splits"]["train"]["num_examples"]
    assert train < 64 * WORKERS  # fewer than one global batch at the default --batch-size
    lowered = train // WORKERS
    [report_file] = glob.glob(str(out / "pipeline_root" / "*" / "train-distributed" / "model" /
                                  "training_report.json"))
    with open(report_file) as f:
        assert json.load(f)["lowered_batch_size"] == lowered
    [done] = [line for line in proc.stdout.splitlines() if line.startswith("  train     done")]
    assert (f"; --batch-size lowered to {lowered}: the train split holds less than one global "
            "batch") in done, done
    assert "batch_size_per_replica" not in proc.stdout
    log = (out / "logs" / "train.log").read_text()
    assert (f"the train split has {train} examples to train on, fewer than one global batch of "
            f"64 x {WORKERS} training processes: training with batch_size_per_replica={lowered} "
            "instead, one step per epoch") in log
