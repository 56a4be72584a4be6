"""The programs the sharding benchmark runs, each in a fresh interpreter (`common.run_child`).

Every program takes `SOURCE OUTPUT FORMAT` (and the Beam one a worker
count), starts its clock after its imports and leaves `_RESULT` with
`seconds`, `examples` and `output_bytes`.
"""

#: kfdist's local runner: the shard step as the pipeline runs it (8 train shards).
LOCAL = """
import sys, time
from kfdist.components.shard_dataset.runtime import shard
started = time.perf_counter()
meta = shard(sys.argv[1], sys.argv[2], source_format=sys.argv[3], num_shards=8, log=lambda l: None)
_RESULT = {"seconds": time.perf_counter() - started,
           "examples": sum(s.num_examples for s in meta.splits.values()),
           "output_bytes": sum(s.num_bytes for split in meta.splits.values() for s in split.shards)}
"""

#: kfdist's Beam runner on this machine: FnApiRunner, one worker process per core.
BEAM = """
import resource, sys, time
from kfdist.components.shard_dataset.runtime import shard
started = time.perf_counter()
meta = shard(sys.argv[1], sys.argv[2], source_format=sys.argv[3], num_shards=8, runner="beam",
             beam_options=[f"direct_num_workers={sys.argv[4]}"], log=lambda l: None)
_RESULT = {"seconds": time.perf_counter() - started,
           "examples": sum(s.num_examples for s in meta.splits.values()),
           "output_bytes": sum(s.num_bytes for split in meta.splits.values() for s in split.shards),
           # An upper bound: a child's ru_maxrss starts from the parent's RSS at fork.
           "largest_worker_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
"""

#: The naive writer of MNIST: numpy reads the IDX files, one Example proto per image, one file.
NAIVE_IDX = """
import glob, gzip, os, sys, time
import numpy as np
import tensorflow as tf
started = time.perf_counter()
os.makedirs(sys.argv[2])
out = os.path.join(sys.argv[2], "data.tfrecord")
count = 0
with tf.io.TFRecordWriter(out) as writer:
    for images_path in sorted(glob.glob(os.path.join(sys.argv[1], "*-images-idx3-ubyte.gz"))):
        with gzip.open(images_path) as f:
            images = np.frombuffer(f.read()[16:], np.uint8).reshape(-1, 28, 28)
        with gzip.open(images_path.replace("-images-idx3-", "-labels-idx1-")) as f:
            labels = np.frombuffer(f.read()[8:], np.uint8)
        for image, label in zip(images, labels):
            example = tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}))
            writer.write(example.SerializeToString())
        count += len(labels)
_RESULT = {"seconds": time.perf_counter() - started, "examples": count,
           "output_bytes": os.path.getsize(out)}
"""

#: The naive writer of a table: pandas reads the CSV, one Example proto per row, one file.
NAIVE_CSV = """
import glob, os, sys, time
import numpy as np
import pandas as pd
import tensorflow as tf
started = time.perf_counter()
os.makedirs(sys.argv[2])
out = os.path.join(sys.argv[2], "data.tfrecord")
count = 0
with tf.io.TFRecordWriter(out) as writer:
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.csv"))):
        for frame in pd.read_csv(path, chunksize=100_000):
            labels = frame.pop("label").to_numpy()
            strings = frame.select_dtypes(include="object")
            numbers = frame.drop(columns=strings.columns).to_numpy(np.float32)
            strings = strings.to_numpy().astype(str)
            for x, s, y in zip(numbers.tolist(), strings.tolist(), labels.tolist()):
                example = tf.train.Example(features=tf.train.Features(feature={
                    "features": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                    "categorical": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[v.encode() for v in s])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[y]))}))
                writer.write(example.SerializeToString())
            count += len(labels)
_RESULT = {"seconds": time.perf_counter() - started, "examples": count,
           "output_bytes": os.path.getsize(out)}
"""

#: The byte-copy limit: copy kfdist's output (a directory of shard files) and sync the copy
#: (after syncing what was written before, which is not the copy's cost).
COPY = """
import os, shutil, sys, time
os.sync()
started = time.perf_counter()
shutil.copytree(sys.argv[1], sys.argv[2])
os.sync()
seconds = time.perf_counter() - started
_RESULT = {"seconds": seconds, "output_bytes": sum(
    os.path.getsize(os.path.join(d, name)) for d, _, names in os.walk(sys.argv[2]) for name in names)}
"""

#: The local runner under cProfile: where its time goes, by stage (`STAGES` in `sharding`).
PROFILE = """
import cProfile, pstats, sys, time
from kfdist.components.shard_dataset.runtime import shard
profile = cProfile.Profile()
started = time.perf_counter()
profile.enable()
shard(sys.argv[1], sys.argv[2], source_format=sys.argv[3], num_shards=8, log=lambda l: None)
profile.disable()
seconds = time.perf_counter() - started
stats = pstats.Stats(profile).stats
_RESULT = {"seconds": seconds,
           "functions": [[f"{path}:{name}", tottime] for (path, line, name), (_, _, tottime, _, _)
                         in stats.items() if tottime > 0.001]}
"""
