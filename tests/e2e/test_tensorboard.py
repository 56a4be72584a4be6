"""TensorBoard curves of a real training step, and `kfdist tensorboard` serving them.

One parameter-server run with a side-car evaluator (the richest layout: the leader's training
and validation curves, the evaluator's per-checkpoint results) is trained once; TensorBoard
itself (the real server) then serves it from the run's directory and from a `gs://` work
location in the GCS emulator, and Ctrl-C leaves none of its processes behind.
"""

import glob
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

from doc_shell_blocks import blocks_run_by, kfdist_commands
from kfdist.components.train_distributed.replica import tensorboard_events
from kfdist.stopping import descendants
from cluster.processes import free_port

pytestmark = pytest.mark.slow
EPOCHS = 3
#: docs/guide/pipelines.md's two commands: a run's directory, then a gs:// work location.
[DOC_BLOCK] = blocks_run_by(__file__)
RUN_DIR_COMMAND, WORK_LOCATION_COMMAND = kfdist_commands(DOC_BLOCK)


@pytest.fixture(scope="module")
def trained(digits_dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("tensorboard") / "run"
    done = subprocess.run(
        [sys.executable, "-m", "kfdist", "train", "--dataset", digits_dataset, "--output",
         str(out), "--strategy", "parameter_server", "--workers", "1", "--ps", "1",
         "--evaluator", "--epochs", str(EPOCHS)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _scalars(directory: str) -> dict:
    import tensorflow as tf

    found = {}
    for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                found.setdefault(value.tag, {})[event.step] = float(tf.make_ndarray(value.tensor))
    return found


def test_the_leader_and_the_evaluator_write_each_epochs_curves(trained):
    root = trained / "model" / "tensorboard"
    train = _scalars(str(root / tensorboard_events.TRAIN))
    validation = _scalars(str(root / tensorboard_events.VALIDATION))
    validation_part = _scalars(str(root / tensorboard_events.VALIDATION_PART))
    evaluator = _scalars(str(root / tensorboard_events.EVALUATOR))
    epochs = list(range(1, EPOCHS + 1))
    for tag in ("epoch_loss", "epoch_accuracy", "epoch_learning_rate",
                "epoch_examples_per_second"):
        assert sorted(train[tag]) == epochs, tag
    assert all(v > 0 for v in train["epoch_examples_per_second"].values())
    history = json.loads((trained / "model" / "history.json").read_text())["epochs"]
    # examples/s over the history's training steps' seconds: the epoch's examples, each epoch
    examples = [train["epoch_examples_per_second"][e["epoch"]] * e["seconds"] for e in history]
    assert examples == pytest.approx([examples[0]] * len(examples), rel=1e-5)
    for entry in history:  # the same figures as the run's history, epoch by epoch
        assert train["epoch_loss"][entry["epoch"]] == pytest.approx(entry["loss"], rel=1e-5)
        assert validation["epoch_accuracy"][entry["epoch"]] == pytest.approx(
            entry["val_accuracy"], rel=1e-5)
        # The validation part's (early stopping's) curve, on the same chart as the others.
        assert validation_part["epoch_loss"][entry["epoch"]] == pytest.approx(
            entry["selection_loss"], rel=1e-5)
    assert not any(tag.startswith("epoch_selection_") for tag in train)
    # One point per checkpoint the evaluator scored, at that checkpoint's epoch.
    assert evaluator["epoch_accuracy"] and set(evaluator["epoch_accuracy"]) <= set(epochs)


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _serve_and_stop(command: list, cwd, expect_runs: set) -> None:
    """Runs the docs' `kfdist tensorboard PATH` (on a free port), reads its runs and a curve,
    then stops it with Ctrl-C."""
    port = free_port()
    board = subprocess.Popen(
        [sys.executable, "-m", "kfdist", *command, "--port", str(port), "--refresh", "1"],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline, runs = time.monotonic() + 120, []
        while time.monotonic() < deadline and not expect_runs <= set(runs):
            assert board.poll() is None, board.stdout.read()
            try:
                runs = _get(f"http://127.0.0.1:{port}/data/runs")
            except OSError:
                pass
            time.sleep(1)
        assert expect_runs <= set(runs), runs
        train_run = next(r for r in runs if r.endswith(tensorboard_events.TRAIN))
        query = urllib.parse.urlencode({"run": train_run, "tag": "epoch_loss"})
        points = _get(f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?{query}")
        assert [p[1] for p in points] == list(range(1, EPOCHS + 1))
        children = descendants(board.pid)
        assert children  # TensorBoard itself
    finally:
        board.send_signal(signal.SIGINT)
        board.wait(timeout=60)
    time.sleep(0.5)
    assert not [pid for pid, _ in children if os.path.exists(f"/proc/{pid}")]


def test_kfdist_tensorboard_serves_a_runs_directory_and_ctrl_c_stops_it(trained, tmp_path):
    run_dir = tmp_path / RUN_DIR_COMMAND[1]
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    run_dir.symlink_to(trained)
    _serve_and_stop(RUN_DIR_COMMAND, tmp_path, {f"model/{name}" for name in (
        "train", "validation", "evaluator")})


def test_kfdist_tensorboard_follows_a_gcs_work_location(trained, gcs_emulator, tmp_path):
    work_uri = WORK_LOCATION_COMMAND[1]
    assert work_uri.startswith("gs://")
    bucket = work_uri[len("gs://"):].split("/")[0]
    if not gcs_emulator.client().lookup_bucket(bucket):
        gcs_emulator.create_bucket(bucket)
    gcs_emulator.upload_dir(str(trained / "model" / "tensorboard"),
                            f"{work_uri}/model/tensorboard")
    _serve_and_stop(WORK_LOCATION_COMMAND, tmp_path, {
        f"model/{name}" for name in ("train", "validation", "evaluator")})


def test_a_path_without_event_files_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "kfdist", "tensorboard", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("kfdist: invalid input: PATH ")
    assert "Traceback" not in done.stderr
