"""train_distributed with the local backend: real worker processes, a real TF cluster on localhost."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from kfdist.components.common import model_artifact
from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed import runtime
from kfdist.components.train_distributed.job.epoch_line import parse_epoch_line
from fakes.process_state import is_running

pytestmark = pytest.mark.slow

CONTRACT = {model_artifact.SAVED_MODEL_DIR, model_artifact.SERVING_MODEL_DIR,
            model_artifact.DATASET_METADATA_FILE,
            model_artifact.HISTORY_FILE, model_artifact.TRAINING_REPORT_FILE,
            model_artifact.EVAL_PREDICTIONS_FILE, "checkpoints", model_artifact.TENSORBOARD_DIR}

USER_MODELS = textwrap.dedent('''
    import json, os
    import tensorflow as tf

    def small_mlp(input_shape, num_classes):
        return tf.keras.Sequential([
            tf.keras.layers.Flatten(input_shape=input_shape),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(num_classes, activation="softmax")])

    def fail_on_worker_1(input_shape, num_classes):
        task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
        if task.get("index") == 1:
            raise RuntimeError("boom in user model on worker 1")
        return small_mlp(input_shape, num_classes)
''')


class Log:
    """Collects log lines; optionally raises `interrupt` on the first replica line."""

    def __init__(self, interrupt=None):
        self.lines = []
        self.interrupt = interrupt

    def __call__(self, line):
        self.lines.append(line)
        if self.interrupt is not None and line.startswith("[worker-"):
            raise self.interrupt

    def launched_pids(self):
        return launched_pids(self.lines)


def launched_pids(lines):
    """The worker pids the launcher logged."""
    started = [line for line in lines if "local replica process(es): " in line]
    return [int(p) for p in re.findall(r"pid (\d+)", started[0])]


def assert_gone(pids):
    assert pids and not [pid for pid in pids if is_running(pid)]


@pytest.fixture(scope="module")
def user_models(tmp_path_factory):
    """A user model module in a directory that is only on the launcher's sys.path."""
    root = tmp_path_factory.mktemp("user_models")
    (root / "kfdist_test_user_models.py").write_text(USER_MODELS)
    return str(root)


@pytest.fixture(scope="module")
def two_workers(digits_dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("two_workers")
    log = Log()
    report = runtime.train(digits_dataset, str(out / "model"), workers=2, epochs=5, log=log,
                           debug_dir=str(out / "job"))
    return report, log, out


def test_two_workers_are_distinct_processes_in_sync(two_workers):
    report, _, _ = two_workers
    assert [r.task for r in report.replicas] == ["worker:0", "worker:1"]
    assert len({r.pid for r in report.replicas}) == 2
    assert all(r.num_replicas_in_sync == 2 for r in report.replicas)
    assert (report.backend, report.strategy, report.workers, report.epochs) == (
        "local", "multi_worker_mirrored", 2, 5)
    assert report.examples_per_second > 0 and report.wall_seconds > 0


def test_replicas_end_with_identical_weights(two_workers):
    report, _, out = two_workers
    assert report.replicas[0].weights_sha256 == report.replicas[1].weights_sha256
    w0 = np.load(out / "job" / "weights-worker-0.npz")
    w1 = np.load(out / "job" / "weights-worker-1.npz")
    assert w0.files == w1.files and len(w0.files) == 4  # two Dense layers: kernels and biases
    assert all(np.array_equal(w0[k], w1[k]) for k in w0.files)


def test_both_workers_stream_into_the_log(two_workers):
    _, log, _ = two_workers
    assert any(line.startswith("[worker-0] ") for line in log.lines)
    assert any(line.startswith("[worker-1] ") for line in log.lines)
    epochs = [line for line in log.lines if re.match(r"\[worker-0\] epoch \d/5: ", line)]
    assert len(epochs) == 5 and "examples/s=" in epochs[-1]
    assert any("sharded by file" in line for line in log.lines)
    assert any(line.startswith("[worker-1] replica worker:1") and "cluster: 2 worker" in line
               for line in log.lines)


def test_model_dir_has_exactly_the_contract(two_workers):
    report, _, out = two_workers
    model_dir = out / "model"
    assert set(os.listdir(model_dir)) == CONTRACT
    leftovers = [os.path.join(d, n) for d, dirs, files in os.walk(model_dir)
                 for n in dirs + files if "worker" in n or "temp" in n]
    assert leftovers == []
    assert model_artifact.read_training_report(str(model_dir)) == report
    history = model_artifact.read_history(str(model_dir))
    assert len(history["loss"]) == 5
    assert history["loss"][report.kept_epoch - 1] == pytest.approx(report.final_loss)
    assert not any(n.startswith("scratch-") for n in os.listdir(out / "job"))


def test_saved_model_reaches_held_out_accuracy(two_workers, digits_dataset):
    import tensorflow as tf

    from kfdist.components.common import dataset_spec, eval_predictions, tf_features

    _, _, out = two_workers
    meta = dataset_spec.load_metadata(digits_dataset)
    parse, preprocess = tf_features.parse_fn(meta), tf_features.preprocess_fn(meta)
    records = tf.data.TFRecordDataset(meta.shard_paths(digits_dataset, "eval"))
    raw, labels = parse(tf.stack(list(records)))
    model = tf.keras.models.load_model(str(out / "model" / model_artifact.SAVED_MODEL_DIR))
    predicted = np.argmax(model(preprocess(raw), training=False).numpy(), axis=1)
    assert len(labels) == meta.splits["eval"].num_examples
    accuracy = float(np.mean(predicted == labels.numpy()))
    assert accuracy >= 0.90
    # The serving SavedModel the leader wrote beside it: raw pixels in, the same classes out.
    serve = tf.saved_model.load(str(out / "model" / model_artifact.SERVING_MODEL_DIR))
    served = serve.signatures["serving_default"](image=tf.cast(raw, tf.uint8))["class_ids"]
    np.testing.assert_array_equal(served.numpy(), predicted)
    # The leader's scoring kept for evaluate_model: the same labels and classes, in shard order.
    kept = eval_predictions.load_matching(str(out / "model"), digits_dataset, meta)
    np.testing.assert_array_equal(kept.labels, labels.numpy())
    np.testing.assert_array_equal(kept.predicted, predicted)


def assert_validated_like_evaluate_model(model_dir, dataset_dir, epochs, report=None):
    """Every epoch of history.json holds the validation part's and the eval split's loss and
    accuracy, and the kept epoch's (the report's, else the last) eval-split figures are what
    `evaluate_model` computes for the saved model (the same weights)."""
    from kfdist.components.evaluate_model.runtime import evaluate

    with open(os.path.join(model_dir, model_artifact.HISTORY_FILE)) as f:
        entries = json.load(f)["epochs"]
    assert [e["epoch"] for e in entries] == list(range(1, epochs + 1))
    for entry in entries:
        assert {"val_loss", "val_accuracy", "selection_loss", "selection_accuracy",
                model_artifact.VALIDATION_SECONDS} <= set(entry), entry
        assert 0.0 <= entry["val_accuracy"] <= 1.0 and entry["val_loss"] > 0.0
        assert entry[model_artifact.EPOCH_SECONDS] > 0.0 and entry[model_artifact.VALIDATION_SECONDS] > 0.0
    kept = entries[(report.kept_epoch if report is not None else epochs) - 1]
    result = evaluate(model_dir, dataset_dir, log=lambda line: None)
    assert kept["val_accuracy"] == pytest.approx(result.accuracy, abs=1e-6)
    assert kept["val_loss"] == pytest.approx(result.loss, abs=1e-4)
    if report is not None:
        assert (report.final_val_loss, report.final_val_accuracy) == (
            kept["val_loss"], kept["val_accuracy"])
    return entries


def test_every_epoch_is_validated_like_evaluate_model(two_workers, digits_dataset):
    report, log, out = two_workers
    entries = assert_validated_like_evaluate_model(str(out / "model"), digits_dataset, 5, report)
    # The leader shows the validation in its epoch lines; worker 1 validates nothing.
    lines = [parse_epoch_line(line) for line in log.lines if line.startswith("[worker-0] epoch ")]
    assert [p.metrics["val_accuracy"] for p in lines] == [
        pytest.approx(e["val_accuracy"], abs=1e-4) for e in entries]
    assert not any("val_" in line for line in log.lines if line.startswith("[worker-1] "))


def test_single_worker_without_tf_config(digits_dataset, tmp_path):
    log = Log()
    report = runtime.train(digits_dataset, str(tmp_path / "model"), workers=1,
                           model_name="mnist_cnn", epochs=1, log=log)
    assert [(r.task, r.num_replicas_in_sync) for r in report.replicas] == [("worker:0", 1)]
    assert set(os.listdir(tmp_path / "model")) == CONTRACT
    assert any("cluster: none (no TF_CONFIG)" in line for line in log.lines)
    assert_validated_like_evaluate_model(str(tmp_path / "model"), digits_dataset, 1, report)


def test_user_model_is_imported_in_the_workers(digits_dataset, tmp_path, user_models, monkeypatch):
    monkeypatch.syspath_prepend(user_models)
    report = runtime.train(digits_dataset, str(tmp_path / "model"), workers=2, epochs=1,
                           model_name="kfdist_test_user_models:small_mlp", log=Log())
    assert report.model_name == "kfdist_test_user_models:small_mlp"
    assert len({r.weights_sha256 for r in report.replicas}) == 1


def test_failing_worker_fails_the_job_and_stops_the_others(digits_dataset, tmp_path, user_models,
                                                           monkeypatch):
    monkeypatch.syspath_prepend(user_models)
    log = Log()
    with pytest.raises(TrainingFailedError) as error:
        runtime.train(digits_dataset, str(tmp_path / "model"), workers=2, epochs=1,
                      model_name="kfdist_test_user_models:fail_on_worker_1", log=log)
    message = str(error.value)
    assert "worker-1" in message and "exit code 1" in message
    assert "boom in user model on worker 1" in message
    assert_gone(log.launched_pids())


def test_corrupt_shard_fails_its_worker(digits_dataset, tmp_path):
    import shutil

    dataset = tmp_path / "dataset"
    shutil.copytree(digits_dataset, dataset)
    shard = dataset / "train" / "shard-00001-of-00002.tfrecord"
    shard.write_bytes(shard.read_bytes()[:1000])
    log = Log()
    with pytest.raises(TrainingFailedError, match=r"worker-1 \(pid \d+\) ended with exit code 1") as error:
        runtime.train(str(dataset), str(tmp_path / "model"), workers=2, epochs=1, log=log)
    assert "DataLossError" in str(error.value) or "corrupted record" in str(error.value)
    assert_gone(log.launched_pids())


def test_interrupt_stops_every_worker(digits_dataset, tmp_path):
    log = Log(interrupt=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        runtime.train(digits_dataset, str(tmp_path / "model"), workers=2, log=log)
    assert_gone(log.launched_pids())


def test_workers_exit_when_the_launcher_is_killed(digits_dataset, tmp_path):
    script = (f"from kfdist.components.train_distributed import runtime; "
              f"runtime.train({digits_dataset!r}, {str(tmp_path / 'model')!r}, workers=2, epochs=50)")
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the killed launcher leaves its work dir here
    launcher = subprocess.Popen([sys.executable, "-u", "-c", script], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env)
    try:
        lines = []
        for line in launcher.stdout:
            lines.append(line)
            if line.startswith("[worker-0] replica worker:0"):
                break
        worker_pids = launched_pids(lines)
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        deadline = time.monotonic() + 20
        while any(is_running(p) for p in worker_pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert_gone(worker_pids)
    finally:
        launcher.kill()
        launcher.wait()
