"""Input pipeline: examples/s the training input pipeline delivers, against two references.

All three read the same kfdist dataset (its train split) in batches of 256,
in one fresh process, kfdist's first: its first epoch is the only one paying
TensorFlow's own warm-up, which can only favour the other two:

* kfdist: `input_pipeline.make_input_fn` (parallel interleaved reads,
  in-memory cache, shuffle, batch-then-parse, parallel map, prefetch);
* naive: `TFRecordDataset(files) -> map(parse one example) -> batch`, sequential;
* limit: already decoded and batched tensors in memory, handed out by tf.data.

The first epoch (cold: files read, cache filled, functions traced) and the
steady state (the mean of the next epochs) are reported separately.
"""

from __future__ import annotations

from typing import Any, Dict

from benchmarks.common import run_child

COMMON = """
import sys, time
from kfdist.components.common import legacy_keras
import numpy as np
import tensorflow as tf
from kfdist.components.common import dataset_spec, tf_features
from kfdist.components.train_distributed.replica import input_pipeline
BATCH = 256
root, epochs = sys.argv[1], int(sys.argv[2])
meta = dataset_spec.load_metadata(root)
steps = meta.splits["train"].num_examples // BATCH
files = meta.shard_paths(root, "train")

def run_epochs(dataset):
    it = iter(dataset)
    times = []
    for _ in range(epochs):
        started = time.perf_counter()
        for _ in range(steps):
            x, y = next(it)
        x.numpy()
        times.append(time.perf_counter() - started)
    return times
"""

PROGRAM = COMMON + """
_RESULT = {"examples_per_epoch": steps * BATCH}
fn = input_pipeline.make_input_fn(meta, root, batch_size_per_replica=BATCH, seed=0)
_RESULT["kfdist"] = run_epochs(fn(tf.distribute.InputContext()))

parse_one = tf_features.parse_fn(meta)
preprocess = tf_features.preprocess_fn(meta)
def one(serialized):
    raw, label = parse_one(tf.expand_dims(serialized, 0))
    return preprocess(raw)[0], label[0]
dataset = tf.data.TFRecordDataset(files).map(one).batch(BATCH, drop_remainder=True).repeat()
_RESULT["naive"] = run_epochs(dataset)

source = iter(fn(tf.distribute.InputContext()))
batches = [next(source) for _ in range(steps)]
xs = tf.stack([b[0] for b in batches]); ys = tf.stack([b[1] for b in batches])
dataset = tf.data.Dataset.from_tensor_slices((xs, ys)).repeat()
_RESULT["in_memory_limit"] = run_epochs(dataset)
"""


def measure(dataset_dir: str, epochs: int = 4) -> Dict[str, Any]:
    """Reads `epochs` epochs with each contender; returns first-epoch and steady-state rates."""
    result: Dict[str, Any] = {}
    r = run_child(PROGRAM, dataset_dir, str(epochs))
    n = r["examples_per_epoch"]
    for name in ("kfdist", "naive", "in_memory_limit"):
        first, steady = r[name][0], r[name][1:]
        result[name] = {"first_epoch_examples_per_second": round(n / first),
                        "steady_examples_per_second": round(n * len(steady) / sum(steady))}
    k, nv, lim = result["kfdist"], result["naive"], result["in_memory_limit"]
    result["steady_vs_limit"] = round(k["steady_examples_per_second"]
                                      / lim["steady_examples_per_second"], 2)
    result["first_epoch_vs_naive"] = round(k["first_epoch_examples_per_second"]
                                           / nv["first_epoch_examples_per_second"], 2)
    result["steady_vs_naive"] = round(k["steady_examples_per_second"]
                                      / nv["steady_examples_per_second"], 2)
    return result
