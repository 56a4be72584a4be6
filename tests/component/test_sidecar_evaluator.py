"""The side-car evaluator: checkpoints it cannot fetch or load end it with the error.

A checkpoint caught mid-write is retried, but one that stays unreadable
(corrupt) or a bucket that does not exist ends the evaluator after its retry
time, with the error named, instead of it retrying for ever.
"""

from __future__ import annotations

import os
import time

import pytest

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.common import model_artifact as ma
from kfdist.components.train_distributed.job import config
from kfdist.components.train_distributed.replica import sidecar_evaluator

pytestmark = pytest.mark.slow

#: Bounds a run that should have ended on its own: an evaluator retrying for ever returns then.
GIVE_UP_SECONDS = 60.0


def _job(dataset_dir: str, tmp_path, state_uri=None) -> config.JobConfig:
    (tmp_path / "work").mkdir(exist_ok=True)
    return config.JobConfig(
        dataset_dir=dataset_dir, model_dir=str(tmp_path / "model"), work_dir=str(tmp_path / "work"),
        training=config.TrainingConfig(model_name="mnist_mlp", epochs=2, batch_size_per_replica=32,
                                       learning_rate=0.001, seed=7, strategy="multi_worker_mirrored"),
        job=config.JobSpec(backend="local", workers=1, evaluator=True), state_uri=state_uri)


def _run_bounded(job: config.JobConfig, lines: list) -> list:
    deadline = time.monotonic() + GIVE_UP_SECONDS
    return sidecar_evaluator.run(job, lines.append, should_stop=lambda: time.monotonic() > deadline,
                                 retry_seconds=3.0)


def test_a_corrupt_checkpoint_ends_the_evaluator_with_the_error(digits_dataset, tmp_path):
    checkpoints = tmp_path / "model" / ma.CHECKPOINTS_DIR
    checkpoints.mkdir(parents=True)
    prefix = checkpoints / ma.CHECKPOINT_PREFIX
    (checkpoints / (prefix.name + ".index")).write_bytes(b"not a checkpoint index" * 10)
    (checkpoints / (prefix.name + ".data-00000-of-00001")).write_bytes(b"\0" * 100)
    lines: list = []
    started = time.monotonic()
    with pytest.raises(sidecar_evaluator.EvaluatorFailedError,
                       match=r"loading the checkpoint kept failing for \d+s: \w+"):
        _run_bounded(_job(digits_dataset, tmp_path), lines)
    assert time.monotonic() - started < GIVE_UP_SECONDS / 2
    assert any("retrying" in line for line in lines), lines  # retried first: it may be mid-write


def test_a_missing_bucket_ends_the_evaluator_with_the_error(gcs_emulator, digits_dataset, tmp_path):
    job = _job(digits_dataset, tmp_path, state_uri="gs://kfdist-no-such-bucket/jobs/1/state")
    with pytest.raises(sidecar_evaluator.EvaluatorFailedError,
                       match=r"fetching the checkpoint kept failing for \d+s: InvalidInputError: "
                             r"the bucket .kfdist-no-such-bucket. of .* does not exist"):
        _run_bounded(job, [])


def test_a_checkpoint_that_appears_later_is_evaluated(digits_dataset, tmp_path):
    """Nothing published yet is not a failure: the evaluator waits past its retry time."""
    import threading

    from kfdist.components.common import dataset_spec
    from kfdist.components.train_distributed.replica import models

    job = _job(digits_dataset, tmp_path)
    model = models.build_model("mnist_mlp", dataset_spec.load_metadata(digits_dataset))
    prefix = os.path.join(job.model_dir, ma.CHECKPOINTS_DIR, ma.CHECKPOINT_PREFIX)
    timer = threading.Timer(5.0, lambda: model.save_weights(prefix))
    timer.start()
    lines: list = []
    deadline = time.monotonic() + GIVE_UP_SECONDS
    results = sidecar_evaluator.run(
        job, lines.append, retry_seconds=3.0,
        should_stop=lambda: bool(lines and "evaluation 1" in lines[-1]) or time.monotonic() > deadline)
    timer.join()
    assert [r["evaluation"] for r in results] == [1], lines
    assert 0.0 <= results[0]["accuracy"] <= 1.0


def _third_line_pixels(png: bytes) -> int:
    """Pixels in matplotlib's third default line colour (C2, #2ca02c): the evaluator's curve."""
    import io

    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    return int((np.abs(rgb - np.array([44, 160, 44])).sum(axis=2) < 40).sum())


def test_every_epochs_checkpoint_is_evaluated_and_in_the_report(digits_dataset, tmp_path):
    """A local job with an evaluator: the chief records each checkpoint's epoch, and waits at the
    end for the evaluation of the last one; the training report and the HTML report hold them."""
    import base64
    import json
    import re
    import subprocess
    import sys

    from kfdist.components.evaluate_model.runtime import evaluate, render_report_html

    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "kfdist", "train", "--strategy", "multi_worker_mirrored",
         "--workers", "2", "--evaluator", "--epochs", "3", "--dataset", digits_dataset,
         "--output", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    model_dir = str(out / "model")
    report = ma.read_training_report(model_dir)
    assert [e["epoch"] for e in report.evaluations] == [1, 2, 3], report.evaluations
    assert all(0.0 <= e["accuracy"] <= 1.0 and e["loss"] > 0 for e in report.evaluations)
    with open(out / "train-summary.json") as f:
        assert json.load(f)["training"]["evaluations"] == report.evaluations
    result = evaluate(model_dir, digits_dataset, log=lambda line: None)
    page = render_report_html(result, ma.read_history(model_dir), report)
    curves = base64.b64decode(re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"',
                                         page)[0])
    assert _third_line_pixels(curves) > 100  # the evaluator's curve in each panel, and its legend
    assert "side-car evaluator" in page and "epoch 3: " in page
