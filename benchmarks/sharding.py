"""Sharding: `shard_dataset` against a naive single-writer loop and a plain byte copy.

Each contender runs in its own process on the same MNIST IDX input:

* kfdist: `shard_dataset`'s runtime (validate, scan, hash split, shuffle,
  balanced shards, metadata, atomic publish), 8 train shards;
* naive: read the IDX files with numpy, build one `tf.train.Example` per
  image and write them all with one `TFRecordWriter`;
* limit: copy a file as large as kfdist's output (the cost of writing the
  bytes at all).

kfdist and the naive writer run at 1x and 10x the input size: kfdist's peak
memory stays flat (it streams; nothing holds the dataset), the naive
writer's grows with the input it loads.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Dict

from benchmarks.common import run_child, write_synthetic_mnist

KFDIST = """
import sys, time
import tensorflow  # imported before the clock starts, as in the naive writer
from kfdist.components.shard_dataset.runtime import shard
started = time.perf_counter()
meta = shard(sys.argv[1], sys.argv[2], source_format="mnist_idx", num_shards=8, log=lambda l: None)
seconds = time.perf_counter() - started
out_bytes = sum(s.num_bytes for split in meta.splits.values() for s in split.shards)
_RESULT = {"seconds": seconds, "examples": sum(s.num_examples for s in meta.splits.values()),
           "output_bytes": out_bytes}
"""

NAIVE = """
import gzip, os, sys, time
import numpy as np
import tensorflow as tf
started = time.perf_counter()
with gzip.open(os.path.join(sys.argv[1], "train-images-idx3-ubyte.gz")) as f:
    images = np.frombuffer(f.read()[16:], np.uint8).reshape(-1, 28, 28)
with gzip.open(os.path.join(sys.argv[1], "train-labels-idx1-ubyte.gz")) as f:
    labels = np.frombuffer(f.read()[8:], np.uint8)
os.makedirs(sys.argv[2])
out = os.path.join(sys.argv[2], "data.tfrecord")
with tf.io.TFRecordWriter(out) as writer:
    for image, label in zip(images, labels):
        example = tf.train.Example(features=tf.train.Features(feature={
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}))
        writer.write(example.SerializeToString())
_RESULT = {"seconds": time.perf_counter() - started, "examples": len(labels),
           "output_bytes": os.path.getsize(out)}
"""

COPY = """
import shutil, sys, time, os
started = time.perf_counter()
shutil.copyfile(sys.argv[1], sys.argv[2])
os.sync()
_RESULT = {"seconds": time.perf_counter() - started, "output_bytes": os.path.getsize(sys.argv[2])}
"""


def measure(examples: int) -> Dict[str, Any]:
    """Shards `examples` and `10 x examples` digits; returns throughput, ratios and peak memory."""
    with tempfile.TemporaryDirectory(prefix="kfdist-bench-shard-") as root:
        small, large = os.path.join(root, "raw1"), os.path.join(root, "raw10")
        write_synthetic_mnist(small, examples)
        write_synthetic_mnist(large, examples * 10, seed=1)
        kfdist = run_child(KFDIST, small, os.path.join(root, "kfdist1"))
        naive = run_child(NAIVE, small, os.path.join(root, "naive1"))
        blob = os.path.join(root, "blob")
        with open(blob, "wb") as f:
            f.write(os.urandom(kfdist["output_bytes"]))
        copy = run_child(COPY, blob, os.path.join(root, "blob-copy"))
        kfdist10 = run_child(KFDIST, large, os.path.join(root, "kfdist10"))
        shutil.rmtree(os.path.join(root, "kfdist10"), ignore_errors=True)
        naive10 = run_child(NAIVE, large, os.path.join(root, "naive10"))

    def rates(r):
        return {"examples_per_second": round(r.get("examples", examples) / r["seconds"]),
                "mb_per_second": round(r["output_bytes"] / r["seconds"] / 1e6, 1),
                "seconds": round(r["seconds"], 2), "peak_rss_mb": round(r["peak_rss_mb"])}

    result = {"examples": examples, "kfdist": rates(kfdist), "naive_writer": rates(naive),
              "copy_limit": {"mb_per_second": round(copy["output_bytes"] / copy["seconds"] / 1e6, 1),
                             "seconds": round(copy["seconds"], 3)},
              "kfdist_10x": rates(kfdist10), "naive_writer_10x": rates(naive10)}
    result["speedup_vs_naive"] = round(result["kfdist"]["examples_per_second"]
                                       / result["naive_writer"]["examples_per_second"], 2)
    result["fraction_of_copy_limit"] = round(result["kfdist"]["mb_per_second"]
                                             / result["copy_limit"]["mb_per_second"], 3)
    result["peak_memory_10x_over_1x"] = round(result["kfdist_10x"]["peak_rss_mb"]
                                              / result["kfdist"]["peak_rss_mb"], 2)
    return result
