"""End to end: `kfdist run mnist` against one plain Keras script doing the same work.

Both start from the same MNIST IDX files (the bundled sample digits) and
train `mnist_mlp` for the same epochs and batch size:

* kfdist: the README's main command, `kfdist run mnist --workers N`
  (kfp.local: shard → train → evaluate → export, each step a process, the
  training replicas more processes); wall time per step from kfp.local's log;
* plain: one Python process that reads the IDX files with numpy, holds out
  20 %, trains, evaluates and saves a SavedModel.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from typing import Any, Dict

from benchmarks.common import CHILD_ENV, REPO_ROOT, run_child

PLAIN = """
import gzip, os, sys, time
started = time.perf_counter()
import numpy as np
import tensorflow as tf
src, out, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def idx(name, offset):
    with gzip.open(os.path.join(src, name)) as f:
        return np.frombuffer(f.read()[offset:], np.uint8)
x = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28).astype("float32") / 255.0
y = idx("train-labels-idx1-ubyte.gz", 8).astype("int64")
order = np.random.default_rng(0).permutation(len(y))
cut = len(y) // 5
x_eval, y_eval, x_train, y_train = x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]
tf.keras.utils.set_random_seed(42)
model = tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28)),
                             tf.keras.layers.Dense(512, activation="relu"),
                             tf.keras.layers.Dropout(0.2),
                             tf.keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer=tf.keras.optimizers.Adam(0.001),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=64, epochs=epochs, verbose=0)
_, accuracy = model.evaluate(x_eval, y_eval, verbose=0)
model.save(os.path.join(out, "model"), save_format="tf")
_RESULT = {"seconds_after_start": time.perf_counter() - started, "accuracy": float(accuracy)}
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


def measure(workers: int = 2, epochs: int = 10) -> Dict[str, Any]:
    """Runs both; returns wall times, kfdist's per-step times and the ratio."""
    from kfdist.sample_data import write_mnist_sample

    with tempfile.TemporaryDirectory(prefix="kfdist-bench-e2e-") as root:
        data = os.path.join(root, "mnist")
        write_mnist_sample(data)
        env = dict(os.environ, **CHILD_ENV)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "kfdist", "run", "mnist", "--workers",
                               str(workers), "--epochs", str(epochs), "--data", data, "--output",
                               os.path.join(root, "run")], env=env, capture_output=True,
                              text=True, timeout=900, cwd=REPO_ROOT)
        kfdist_wall = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"kfdist run mnist failed:\n{done.stderr[-3000:]}")
        steps = step_seconds(_logs_of(os.path.join(root, "run")))
        started = time.perf_counter()
        plain = run_child(PLAIN, data, os.path.join(root, "plain"), str(epochs))
        plain_wall = time.perf_counter() - started
    return {"workers": workers, "epochs": epochs,
            "kfdist_seconds": round(kfdist_wall, 2), "kfdist_steps": steps,
            "plain_script_seconds": round(plain_wall, 2),
            "plain_accuracy": round(plain["accuracy"], 4),
            "kfdist_over_plain": round(kfdist_wall / plain_wall, 2)}
