"""End to end: `kfdist run mnist` against one plain Keras script doing the same work.

Both start from the same MNIST IDX files: generated MNIST-shaped digits
(`common.write_synthetic_mnist`), `train-*` and `t10k-*` as MNIST ships them,
60,000 and 10,000 examples in the full run. Both train `mnist_mlp` on tf-keras
for the same epochs with batch 64 on the `train` files and score the `t10k`
files (kfdist keeps a source's own split):

* kfdist: the README's main command with one training process,
  `kfdist run mnist --workers 1 --strategy mirrored` (kfp.local: shard →
  train → evaluate → export, each step a process, the training replica one
  more); wall time per step from kfp.local's log. Its training runs 16
  steps per call of the train function (the `steps_per_execution`
  default): the same updates, in the same order. Its epochs' times (steps
  and validation, as the plain script's) come from the model's history;
* plain: one Python process that reads the IDX files with numpy, trains
  with `fit`'s defaults (a call per step), evaluates and saves a
  SavedModel. Like kfdist's training, it scores the held-out split after
  every epoch (in batches of 256, as kfdist does). Its
  first epoch also traces the training function (AutoGraph); that one-off
  cost (first epoch minus the mean of the others) is reported apart, and
  so is the time `fit` takes to return after its last epoch (usually
  nothing; on a busy machine tf-keras has been seen to spend 15-20 s there).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from typing import Any, Dict, List

from kfdist.local_run import SUMMARY_FILE

from benchmarks.common import (CHILD_ENV, REPO_ROOT, epoch_wall_seconds, run_child,
                               write_synthetic_mnist)

PLAIN = """
import gzip, os, sys, time
started = time.perf_counter()
import numpy as np
import tensorflow as tf
src, out, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def idx(name, offset):
    with gzip.open(os.path.join(src, name)) as f:
        return np.frombuffer(f.read()[offset:], np.uint8)
def split(prefix):
    x = idx(prefix + "-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28).astype("float32") / 255.0
    return x, idx(prefix + "-labels-idx1-ubyte.gz", 8).astype("int64")
(x_train, y_train), (x_eval, y_eval) = split("train"), split("t10k")
tf.keras.utils.set_random_seed(42)
model = tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28)),
                             tf.keras.layers.Dense(512, activation="relu"),
                             tf.keras.layers.Dropout(0.2),
                             tf.keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer=tf.keras.optimizers.Adam(0.001),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"])
times = []
class Timer(tf.keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None): self.t = time.perf_counter()
    def on_epoch_end(self, epoch, logs=None):
        self.last = time.perf_counter()
        times.append(self.last - self.t)
timer = Timer()
model.fit(x_train, y_train, batch_size=64, epochs=epochs, verbose=0, callbacks=[timer],
          validation_data=(x_eval, y_eval), validation_batch_size=256)
fit_return = time.perf_counter() - timer.last
_, accuracy = model.evaluate(x_eval, y_eval, verbose=0)
model.save(os.path.join(out, "model"), save_format="tf")
_RESULT = {"seconds_after_start": time.perf_counter() - started, "accuracy": float(accuracy),
           "epoch_seconds": times, "fit_return_seconds": fit_return}
"""

_STAMP = re.compile(r"^(\d\d:\d\d:\d\d\.\d+) - INFO - (.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def step_seconds(log: str) -> Dict[str, float]:
    """Seconds per task, from kfp.local's `Executing task` / `Task ... finished` lines
    (kept in the run's step logs)."""
    started: Dict[str, datetime] = {}
    out: Dict[str, float] = {}
    for raw in log.splitlines():
        match = _STAMP.match(_ANSI.sub("", raw))
        if not match:
            continue
        when = datetime.strptime(match.group(1), "%H:%M:%S.%f")
        text = match.group(2)
        task = re.search(r"'([^']+)'", text)
        if task and text.startswith("Executing task"):
            started[task.group(1)] = when
        elif task and text.startswith("Task ") and "finished" in text and task.group(1) in started:
            out[task.group(1)] = round((when - started[task.group(1)]).total_seconds() % 86400, 2)
    return out


def _logs_of(run_dir: str) -> str:
    """Every line `kfdist run` kept (`<run>/logs/<step>.log`), as one text."""
    import glob

    texts = []
    for path in sorted(glob.glob(os.path.join(run_dir, "logs", "*.log"))):
        with open(path) as f:
            texts.append(f.read())
    return "\n".join(texts)


def _train_history(run_dir: str) -> List[Dict[str, float]]:
    """The training step's `history.json` epochs (seconds, validation, accuracies)."""
    import glob

    [path] = glob.glob(os.path.join(run_dir, "pipeline_root", "*", "train-distributed", "model",
                                    "history.json"))
    with open(path) as f:
        return json.load(f)["epochs"]


def write_mnist_like(root: str, train_examples: int) -> str:
    """`train-*` with `train_examples` digits and `t10k-*` with a sixth of that, as MNIST's."""
    data = os.path.join(root, "mnist")
    write_synthetic_mnist(data, train_examples, seed=3)
    write_synthetic_mnist(data, train_examples // 6, seed=4, prefix="t10k")
    return data


def _plain_figures(plain: Dict[str, Any], wall: float) -> Dict[str, Any]:
    epochs = plain["epoch_seconds"]
    later = epochs[1:] or epochs
    one_off = max(0.0, epochs[0] - sum(later) / len(later))
    return {"plain_script_seconds": round(wall, 2), "plain_accuracy": round(plain["accuracy"], 4),
            "plain_epoch_seconds": [round(e, 2) for e in epochs],
            "plain_one_off_autograph_seconds": round(one_off, 2),
            "plain_fit_return_seconds": round(plain["fit_return_seconds"], 2)}


def measure(data: str, train_examples: int, epochs: int) -> Dict[str, Any]:
    """Runs both on `data` (`write_mnist_like`, `train_examples` digits); returns wall times,
    kfdist's steps and the ratio."""
    with tempfile.TemporaryDirectory(prefix="kfdist-bench-e2e-") as root:
        env = dict(os.environ, **CHILD_ENV)
        started = time.perf_counter()
        command = ["run", "mnist", "--workers", "1", "--strategy", "mirrored", "--epochs",
                   str(epochs), "--data", data, "--output", os.path.join(root, "run")]
        done = subprocess.run([sys.executable, "-m", "kfdist", *command], env=env,
                              capture_output=True, text=True, timeout=900, cwd=REPO_ROOT)
        kfdist_wall = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"kfdist run mnist failed:\n{done.stderr[-3000:]}")
        logs = _logs_of(os.path.join(root, "run"))
        steps = step_seconds(logs)
        history = _train_history(os.path.join(root, "run"))
        with open(os.path.join(root, "run", SUMMARY_FILE)) as f:
            accuracy = json.load(f)["eval"]["accuracy"]
        started = time.perf_counter()
        plain = run_child(PLAIN, data, os.path.join(root, "plain"), str(epochs))
        plain_wall = time.perf_counter() - started
    result = {"train_examples": train_examples, "eval_examples": train_examples // 6,
              "workers": 1, "strategy": "mirrored", "epochs": epochs, "batch_size": 64,
              "kfdist_seconds": round(kfdist_wall, 2), "kfdist_steps": steps,
              "kfdist_epoch_seconds": [round(e, 2) for e in epoch_wall_seconds(history)],
              "kfdist_train_history": history,
              "kfdist_accuracy": accuracy,
              **_plain_figures(plain, plain_wall)}
    result["kfdist_over_plain"] = round(kfdist_wall / plain_wall, 2)
    # The target's figure: no credit for a stall of the plain script's `fit` on its way out.
    result["kfdist_over_plain_without_fit_return"] = round(
        kfdist_wall / (plain_wall - result["plain_fit_return_seconds"]), 2)
    result["kfdist_over_plain_without_autograph"] = round(
        kfdist_wall / (plain_wall - result["plain_one_off_autograph_seconds"]), 2)
    return result
