"""Training overhead: kfdist's local backend against plain single-process Keras.

Same model (`mnist_mlp`), data (the train split of a kfdist dataset), batch
(64 per replica), optimizer and epochs:

* plain Keras: the split decoded into numpy arrays, `model.fit(x, y)` in one process;
* kfdist local backend, 1 worker: the training step as the pipeline runs it
  (a replica process, sharded tf.data input, backups and checkpoints every
  epoch, 16 steps per call of the train function: `steps_per_execution`'s
  default).

Several workers are measured by `time_to_accuracy` (every strategy on 60,000
digits) and `python -m benchmarks.strategies`.

Steady state is the mean over the epochs after the first (which traces
functions and fills caches); the first epoch and the whole job are reported
too, with kfdist's input-bound fraction.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Dict

from benchmarks.common import run_child

PLAIN = """
import sys, time
from kfdist.components.common import legacy_keras
import numpy as np
import tensorflow as tf
from kfdist.components.common import dataset_spec, tf_features
from kfdist.components.train_distributed.replica import models
root, epochs, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
meta = dataset_spec.load_metadata(root)
parse, preprocess = tf_features.parse_fn(meta), tf_features.preprocess_fn(meta)
records = list(tf.data.TFRecordDataset(meta.shard_paths(root, "train")).batch(10**6))[0]
raw, y = parse(records)
x = preprocess(raw).numpy(); y = y.numpy()
tf.keras.utils.set_random_seed(0)
model = models.build_model("mnist_mlp", meta)
models.compile_model(model, 0.001)
times = []
class T(tf.keras.callbacks.Callback):
    def on_epoch_begin(self, e, logs=None): self.t = time.perf_counter()
    def on_epoch_end(self, e, logs=None): times.append(time.perf_counter() - self.t)
steps = len(y) // batch
started = time.perf_counter()
model.fit(x[:steps * batch], y[:steps * batch], batch_size=batch, epochs=epochs, verbose=0,
          shuffle=True, callbacks=[T()])
_RESULT = {"epoch_seconds": times, "steps_per_epoch": steps, "fit_seconds": time.perf_counter() - started}
"""

KFDIST = """
import json, os, sys, time
from kfdist.components.common import dataset_spec, model_artifact
from kfdist.components.train_distributed import runtime
root, epochs, batch, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
started = time.perf_counter()
report = runtime.train(root, out, workers=1, epochs=epochs, batch_size_per_replica=batch,
                       log=lambda line: None)
job = time.perf_counter() - started
with open(os.path.join(out, "history.json")) as f:
    times = [e[model_artifact.EPOCH_SECONDS] for e in json.load(f)["epochs"]]
meta = dataset_spec.load_metadata(root)
_RESULT = {"epoch_seconds": times, "steps_per_epoch": meta.splits["train"].num_examples // batch,
           "fit_seconds": report.wall_seconds, "job_seconds": job,
           "input_bound_fraction": report.input_bound_fraction}
"""


def _rates(r: Dict[str, Any], batch: int) -> Dict[str, Any]:
    steady = r["epoch_seconds"][1:]
    steps_per_second = r["steps_per_epoch"] * len(steady) / sum(steady)
    out = {"steady_steps_per_second": round(steps_per_second, 1),
           "first_epoch_seconds": round(r["epoch_seconds"][0], 2),
           "fit_seconds": round(r["fit_seconds"], 2)}
    for key in ("job_seconds", "input_bound_fraction"):
        if key in r:
            out[key] = None if r[key] is None else round(r[key], 4 if "fraction" in key else 2)
    return out


def measure(dataset_dir: str, epochs: int, batch: int = 64) -> Dict[str, Any]:
    """Trains with each contender; returns steady steps/s and the ratios to plain Keras."""
    plain = _rates(run_child(PLAIN, dataset_dir, str(epochs), str(batch)), batch)
    result: Dict[str, Any] = {"epochs": epochs, "batch_size_per_replica": batch,
                              "plain_keras": plain}
    with tempfile.TemporaryDirectory(prefix="kfdist-bench-train-") as root:
        r = run_child(KFDIST, dataset_dir, str(epochs), str(batch), os.path.join(root, "model"))
    rates = _rates(r, batch)
    rates["steady_examples_per_second"] = round(rates["steady_steps_per_second"] * batch)
    result["kfdist_1_worker"] = rates
    plain["steady_examples_per_second"] = round(plain["steady_steps_per_second"] * batch)
    result["one_worker_vs_plain"] = round(rates["steady_steps_per_second"]
                                          / plain["steady_steps_per_second"], 2)
    return result
