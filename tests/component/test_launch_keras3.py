"""The TensorFlow tutorial's multi-worker Keras `fit` program under `kfdist launch --backend local`:
under Keras 3 it fails, and kfdist says in one line what that is and the fix, without the
tensors of the failure flooding the console; with `--env TF_USE_LEGACY_KERAS=1` it trains and
`kfdist.program.save_model` writes its SavedModel."""

import os
import re
import subprocess
import sys

import pytest

from kfdist.components.launch_program.program_failures import LAUNCH_LOCAL, keras3_hint

KERAS3_HINT = keras3_hint(LAUNCH_LOCAL)

# The tutorial's program (tensorflow.org/tutorials/distribute/multi_worker_with_keras), small:
# scikit-learn's handwritten digits in place of MNIST.
TUTORIAL = """
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

strategy = tf.distribute.MultiWorkerMirroredStrategy()
digits = load_digits()
x = (digits.images / 16.0).astype(np.float32)
y = digits.target.astype(np.int64)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x)).repeat().batch(64)
with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.Input(shape=(8, 8)),
        tf.keras.layers.Reshape(target_shape=(8, 8, 1)),
        tf.keras.layers.Conv2D(16, 3, activation="relu"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10)])
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=tf.keras.optimizers.SGD(learning_rate=0.05), metrics=["accuracy"])
history = model.fit(dataset, epochs=2, steps_per_epoch=5, verbose=2)
print("trained: accuracy", history.history["accuracy"][-1], flush=True)

from kfdist import program  # every replica saves (a collective); the leader's copy is kept

program.save_model(model)
"""
#: A line of a printed tensor's numbers (`[0.05, 0.24, ...,`), after the replica's label.
TENSOR_ROW = re.compile(r"^(\[[\w-]+\] |\s+)\s*\[*-?\d+\.\d*(e[-+]\d+)?,")


def _launch(tmp_path, *flags):
    program = tmp_path / "tutorial.py"
    program.write_text(TUTORIAL)
    # Keras 3 is TensorFlow 2.21's tf.keras unless the program's environment says otherwise.
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    return subprocess.run(
        [sys.executable, "-m", "kfdist", "launch", "--backend", "local", "--framework",
         "tensorflow", "--workers", "2", "--output", str(tmp_path / "out"), "--timeout", "300",
         *flags, "--", sys.executable, str(program)],
        capture_output=True, text=True, timeout=400, env=env)


@pytest.mark.slow
def test_keras3_failure_is_one_line_with_its_fix_not_80_lines_of_tensors(tmp_path):
    done = _launch(tmp_path)
    console = done.stdout + done.stderr
    assert done.returncode == 1, console[-3000:]
    assert done.stderr.rstrip().splitlines()[-1] == KERAS3_HINT, done.stderr[-3000:]
    assert console.count(KERAS3_HINT) == 1
    rows = [line for line in console.splitlines() if TENSOR_ROW.match(line)]
    assert rows == [], rows[:5]
    assert "numpy=" not in console
    # Each replica's error is one line: its message's first and last lines, joined.
    folded = [line for line in console.splitlines()
              if "Attempt to convert a value (PerReplica" in line]
    assert folded and all("line(s) of the value left out" in line and
                          line.endswith("to a Tensor.") for line in folded), folded
    assert len(console.splitlines()) < 150, len(console.splitlines())


@pytest.mark.slow
def test_the_same_program_trains_with_legacy_keras_set_by_env(tmp_path):
    done = _launch(tmp_path, "--env", "TF_USE_LEGACY_KERAS=1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for worker in ("worker-0", "worker-1"):
        assert re.search(rf"^\[{worker}\] trained: accuracy", done.stdout, re.M), \
            done.stdout[-3000:]
    assert KERAS3_HINT not in done.stdout + done.stderr
    assert (tmp_path / "out" / "model" / "saved_model.pb").is_file()
    assert os.path.isfile(tmp_path / "out" / "model" / "keras_metadata.pb")  # tf-keras' save
    assert "wrote nothing into its model directory" not in done.stderr
