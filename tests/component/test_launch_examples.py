"""The examples/ programs run unchanged under `kfdist launch --backend local`."""

import json
import os
import re
import signal
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples")


def _launch(output, layout, program, *program_args):
    return subprocess.run(
        [sys.executable, "-m", "kfdist", "launch", "--framework", "tensorflow", *layout,
         "--output", str(output), "--timeout", "300", "--",
         sys.executable, os.path.join(EXAMPLES, program), *program_args],
        capture_output=True, text=True, timeout=400)


def _eval_accuracy(model_dir, dataset_dir):
    import tensorflow as tf

    from kfdist import program

    model = tf.keras.models.load_model(str(model_dir), compile=False)
    hits = total = 0
    for x, y in program.dataset("eval", batch_size=256, directory=dataset_dir):
        hits += int(tf.reduce_sum(tf.cast(tf.argmax(model(x), 1) == y, tf.int32)))
        total += int(y.shape[0])
    return hits / total


def _saved_model_predicts(model_dir, x):
    import tensorflow as tf

    model = tf.saved_model.load(str(model_dir))
    return float(model.signatures["serving_default"](tf.constant([[x]]))
                 [next(iter(model.signatures["serving_default"].structured_outputs))][0][0])


@pytest.mark.slow
def test_tf1_between_graph_parameter_server_program(tmp_path):
    done = _launch(tmp_path, ["--workers", "2", "--ps", "1"], "tf1_parameter_server.py",
                   "--steps", "200")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    weights = json.load(open(tmp_path / "model" / "weights.json"))
    assert abs(weights["w"] - 3) < 0.3 and abs(weights["b"] - 2) < 0.3, weights
    assert any(name.startswith("model.ckpt") for name in os.listdir(tmp_path / "checkpoints"))
    assert "[worker-1] worker 1 of 2 training" in done.stdout, done.stdout[-3000:]
    # The parameter server never ends by itself: the launcher ends it once the chief is done (a
    # non-chief worker may still be finishing its last step then, or may have ended already).
    still_running = re.search(r"ending the replicas still running: (.*)", done.stdout)
    assert still_running and "ps-0" in still_running.group(1).split(", "), done.stdout[-3000:]


@pytest.mark.slow
def test_tf2_multi_worker_custom_loop_saves_a_saved_model(tmp_path):
    done = _launch(tmp_path, ["--workers", "2"], "tf2_multi_worker_custom_loop.py", "--steps", "60")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert abs(_saved_model_predicts(tmp_path / "model", 1.0) - 5.0) < 0.5


@pytest.mark.slow
def test_keras_fit_with_backup_and_restore_saves_a_saved_model(tmp_path, digits_dataset):
    done = _launch(tmp_path, ["--workers", "2", "--dataset", digits_dataset],
                   "keras_fit_backup_restore.py", "--epochs", "3")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _eval_accuracy(tmp_path / "model", digits_dataset) > 0.8
    assert "[worker-1] Epoch 3/3" in done.stdout


@pytest.mark.slow
def test_killed_keras_worker_restarts_and_resumes_from_the_checkpoint_dir(tmp_path,
                                                                         digits_dataset):
    argv = [sys.executable, "-m", "kfdist", "launch", "--framework", "tensorflow", "--workers", "2",
            "--restart-policy", "ExitCode", "--output", str(tmp_path), "--timeout", "300",
            "--dataset", digits_dataset, "--",
            sys.executable, os.path.join(EXAMPLES, "keras_fit_backup_restore.py"),
            "--epochs", "4", "--steps-per-epoch", "50"]
    lines = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as job:
        killed = False
        for line in job.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("started ") and "worker-1 pid " in line:
                worker_1 = int(line.split("worker-1 pid ")[1].split(",")[0])
            if not killed and line.startswith("[worker-1] Epoch 2/4"):
                os.kill(worker_1, signal.SIGKILL)
                killed = True
        assert job.wait(timeout=400) == 0, "\n".join(lines[-60:])
    output = "\n".join(lines)
    assert killed and "worker-1 exited with code 137; restarting it (restartPolicy ExitCode" in output
    after_kill = output[output.index("worker-1 exited with code 137"):]
    assert "[worker-1] Epoch 1/4" not in after_kill, output  # resumed from the backup, not epoch 1
    assert "[worker-1] Epoch 4/4" in after_kill
    assert _eval_accuracy(tmp_path / "model", digits_dataset) > 0.8


@pytest.mark.slow
def test_pytorch_ddp_program_trains_on_a_master_and_two_workers(tmp_path):
    import torch

    done = subprocess.run(
        [sys.executable, "-m", "kfdist", "launch", "--framework", "pytorch", "--workers", "3",
         "--output", str(tmp_path), "--timeout", "300", "--",
         sys.executable, os.path.join(EXAMPLES, "pytorch_ddp.py"), "--steps", "100"],
        capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[master-0] saved model.pt (world size 3)" in done.stdout
    assert "[worker-1] rank 2 step 100" in done.stdout
    weights = torch.load(tmp_path / "model" / "model.pt")
    assert abs(float(weights["weight"]) - 3) < 0.3 and abs(float(weights["bias"]) - 2) < 0.3
