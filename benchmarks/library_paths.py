"""kfdist's hand-written parts against the library path that would replace them.

The shard step writes TFRecord files of `tf.train.Example`s and reads CSV
tables, and the evaluation reads columns of them back. Four parts are written
by hand; each is timed here against
what a library does, on the same input, in one process, best of `REPEATS`
(alternating, so a noisy neighbour hurts both alike), and the outputs are
checked equal:

* Example encoding: `example_encoding.CanonicalExampleEncoder` (precomputed
  protobuf framing per label) against building a `tf.train.Example` per row
  and `SerializeToString(deterministic=True)`, for MNIST-shaped images and
  for table rows (120 floats and 2 strings, as `common.write_synthetic_csv`);
* TFRecord framing: `tfrecord_framing.TFRecordFileWriter` (framing with
  google-crc32c, SHA-256 while writing) against `tf.io.TFRecordWriter` plus
  reading the file back for its SHA-256, which the dataset's metadata needs;
  uncompressed and GZIP;
* reading Example shards: the evaluation's slice reader (`slices.read_shards`:
  the same framing read back, and a protobuf `Example` class, no TensorFlow)
  against `tf.data.TFRecordDataset` with `tf.io.parse_example`, two columns
  and the labels of a quarter as many table rows;
* CSV reading: the shard step's reader (`csv_reader`: pyarrow's streaming
  reader, falling back to the `csv` module) and its `csv`-module path alone
  against `pyarrow.csv.open_csv` streaming and pandas `read_csv` in chunks,
  each producing the float32 feature matrix and the string columns of every
  row. kfdist's reader reads every file twice (the profile of column kinds and
  classes, then the rows, checked); its read pass alone is timed too, against
  the single pass of the library loops, which check nothing.

The library paths need TensorFlow in the shard step and in a sliced
evaluation: importing it is timed too (a fresh interpreter, against one
importing numpy and google-crc32c), because those steps would pay it on every
run.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

import numpy as np

from benchmarks.common import write_synthetic_csv

REPEATS = 3
#: Rows of each block the encoders get (the shard step encodes a source batch at a time).
BLOCK = 4096


def _best(fns: Dict[str, Callable[[], Any]]) -> Dict[str, float]:
    """Each function's best wall time over `REPEATS` alternating rounds."""
    best = {name: float("inf") for name in fns}
    for _ in range(REPEATS):
        for name, fn in fns.items():
            started = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - started)
    return {name: round(seconds, 4) for name, seconds in best.items()}


def _proto_images(tf, images: np.ndarray, labels: np.ndarray) -> List[bytes]:
    feature, example = tf.train.Feature, tf.train.Example
    return [example(features=tf.train.Features(feature={
        "image": feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
        "label": feature(int64_list=tf.train.Int64List(value=[label]))}))
        .SerializeToString(deterministic=True) for image, label in zip(images, labels.tolist())]


def _proto_rows(tf, numbers: np.ndarray, strings: np.ndarray, labels: np.ndarray) -> List[bytes]:
    feature, example = tf.train.Feature, tf.train.Example
    return [example(features=tf.train.Features(feature={
        "features": feature(float_list=tf.train.FloatList(value=x)),
        "categorical": feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in s])),
        "label": feature(int64_list=tf.train.Int64List(value=[y]))}))
        .SerializeToString(deterministic=True)
        for x, s, y in zip(numbers.tolist(), strings.tolist(), labels.tolist())]


def _in_blocks(encode: Callable[[slice], List[bytes]], n: int) -> List[bytes]:
    out: List[bytes] = []
    for start in range(0, n, BLOCK):
        out.extend(encode(slice(start, start + BLOCK)))
    return out


def measure_encoding(tf, examples: int) -> Dict[str, Any]:
    """Example encoding, images and table rows: seconds, examples/s and the ratio."""
    from kfdist.components.shard_dataset.example_encoding import CanonicalExampleEncoder

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (examples, 28, 28), dtype=np.uint8)
    numbers = rng.normal(size=(examples, 120)).astype(np.float32)
    strings = rng.choice(np.array(["red", "green", "blue", "S", "M", "L"]), (examples, 2))
    labels = rng.integers(0, 10, examples)
    image_encoder = CanonicalExampleEncoder("image", 784)
    row_encoder = CanonicalExampleEncoder("features", 4 * 120)
    contenders = {
        "images_kfdist": lambda: _in_blocks(lambda s: image_encoder.encode(images[s], labels[s]),
                                            examples),
        "images_proto": lambda: _proto_images(tf, images, labels),
        "rows_kfdist": lambda: _in_blocks(lambda s: row_encoder.encode(
            numbers[s], labels[s], strings[s]), examples),
        "rows_proto": lambda: _proto_rows(tf, numbers, strings, labels),
    }
    assert contenders["images_kfdist"]() == contenders["images_proto"](), "image bytes differ"
    assert contenders["rows_kfdist"]() == contenders["rows_proto"](), "row bytes differ"
    seconds = _best(contenders)
    return {"examples": examples, "seconds": seconds,
            "images_kfdist_over_proto": round(seconds["images_proto"] / seconds["images_kfdist"], 1),
            "rows_kfdist_over_proto": round(seconds["rows_proto"] / seconds["rows_kfdist"], 1)}


def _sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def measure_framing(tf, records: List[bytes], root: str) -> Dict[str, Any]:
    """TFRecord files of `records`: kfdist's writer against `tf.io.TFRecordWriter` + SHA-256."""
    from kfdist.components.common.tfrecord_framing import TFRecordFileWriter, read_records

    result: Dict[str, Any] = {"records": len(records),
                              "megabytes": round(sum(map(len, records)) / 1e6, 1)}
    for compression in (None, "GZIP"):
        ours, theirs = os.path.join(root, "kfdist.tfrecord"), os.path.join(root, "tf.tfrecord")

        def kfdist_writer():
            writer = TFRecordFileWriter(ours, compression)
            for start in range(0, len(records), BLOCK):
                writer.write_many(records[start:start + BLOCK])
            writer.close()
            return writer.sha256

        def tf_writer():
            options = tf.io.TFRecordOptions(compression_type=compression or "")
            with tf.io.TFRecordWriter(theirs, options) as writer:
                for record in records:
                    writer.write(record)
            return _sha256_of(theirs)

        seconds = _best({"kfdist": kfdist_writer, "tf": tf_writer})
        same = (list(read_records(ours, compression)) == list(read_records(theirs, compression))
                == records)
        key = (compression or "none").lower()
        result[key] = {"seconds": seconds, "same_records": same,
                       "kfdist_over_tf": round(seconds["tf"] / seconds["kfdist"], 2)}
    return result


def measure_column_read(tf, records: List[bytes], root: str) -> Dict[str, Any]:
    """Two columns and the labels of table-row shards: kfdist's reader (framing and a protobuf
    Example class, no TensorFlow) against `tf.data` with `tf.io.parse_example`."""
    from kfdist.components.common.dataset_spec import FeatureSpec
    from kfdist.components.common.tfrecord_framing import TFRecordFileWriter
    from kfdist.components.evaluate_model.slices import read_shards

    paths = [os.path.join(root, f"eval-{i}.tfrecord") for i in range(2)]
    for i, path in enumerate(paths):
        writer = TFRecordFileWriter(path)
        writer.write_many(records[i::2])
        writer.close()
    spec = FeatureSpec(key="features", dtype="float32", shape=(120,),
                       columns=tuple(f"x{i}" for i in range(120)), categorical_columns=("color", "size"))
    parse = {"features": tf.io.FixedLenFeature([120], tf.float32),
             "categorical": tf.io.FixedLenFeature([2], tf.string),
             "label": tf.io.FixedLenFeature([], tf.int64)}

    def tf_read():
        parts = [(b["categorical"].numpy()[:, 1], b["features"].numpy()[:, 3], b["label"].numpy())
                 for b in tf.data.TFRecordDataset(paths).batch(4096).map(
                     lambda s: tf.io.parse_example(s, parse))]
        return ({"size": np.array([v.decode() for p in parts for v in p[0]], dtype=object),
                 "x3": np.concatenate([p[1] for p in parts])}, np.concatenate([p[2] for p in parts]))

    def kfdist_read():
        return read_shards(spec, paths, None, ["size", "x3"])

    ours, theirs = kfdist_read(), tf_read()
    same = all(np.array_equal(ours[0][c], theirs[0][c]) for c in ("size", "x3")) and \
        np.array_equal(ours[1], theirs[1])
    seconds = _best({"kfdist": kfdist_read, "tf": tf_read})
    return {"examples": len(records), "seconds": seconds, "same_values": same,
            "kfdist_over_tf": round(seconds["tf"] / seconds["kfdist"], 2)}


def measure_import() -> Dict[str, float]:
    """Seconds to import TensorFlow in a fresh interpreter, and the shard step's own imports."""
    def import_seconds(module: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
        return time.perf_counter() - started
    return _best({"tensorflow": lambda: import_seconds("tensorflow"),
                  "numpy_crc32c_pyarrow": lambda: import_seconds(
                      "numpy, google_crc32c, pyarrow.csv")})


def _open_kfdist(files: List[str], columnar: bool = True):
    from kfdist.components.shard_dataset.csv_reader import open_csv_source
    from kfdist.components.shard_dataset.source import ReaderOptions

    return open_csv_source(files, ReaderOptions(label_column="label"), columnar=columnar)


def _rows_of(source) -> int:
    return sum(len(batch.labels) for batch in source.batches())


def _read_pyarrow(files: List[str]) -> int:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    rows = 0
    for path in files:
        reader = pcsv.open_csv(path, read_options=pcsv.ReadOptions(block_size=8 << 20))
        for batch in reader:
            table = pa.Table.from_batches([batch])
            strings = [table.column(c).to_numpy(zero_copy_only=False) for c in ("color", "size")]
            numbers = np.stack([table.column(c).to_numpy(zero_copy_only=False).astype(np.float32)
                                for c in table.column_names if c.startswith("x")], axis=1)
            rows += len(numbers) + 0 * len(strings)
    return rows


def _read_pandas(files: List[str]) -> int:
    import pandas as pd

    rows = 0
    for path in files:
        for frame in pd.read_csv(path, chunksize=100_000):
            strings = frame[["color", "size"]].to_numpy().astype(str)
            numbers = frame[[c for c in frame.columns if c.startswith("x")]].to_numpy(np.float32)
            rows += len(numbers) + 0 * len(strings)
    return rows


def measure_csv(num_bytes: int, root: str) -> Dict[str, Any]:
    """Every row of a generated CSV into float32 features and string columns, five ways."""
    table = write_synthetic_csv(os.path.join(root, "csv"), num_bytes, parts=2)
    files = sorted(os.path.join(root, "csv", name) for name in os.listdir(os.path.join(root, "csv")))
    counts = {}

    def run(name, fn):
        def go():
            counts[name] = fn()
        return go

    opened = _open_kfdist(files)
    seconds = _best({"kfdist": run("kfdist", lambda: _rows_of(_open_kfdist(files))),
                     "kfdist_read_pass": run("kfdist_read_pass", lambda: _rows_of(opened)),
                     "kfdist_csv_module": run("kfdist_csv_module",
                                              lambda: _rows_of(_open_kfdist(files, False))),
                     "pyarrow_open_csv": run("pyarrow_open_csv", lambda: _read_pyarrow(files)),
                     "pandas_chunks": run("pandas_chunks", lambda: _read_pandas(files))})
    assert len(set(counts.values())) == 1, f"row counts differ: {counts}"
    return {"rows": table["rows"], "megabytes": round(table["bytes"] / 1e6, 1), "seconds": seconds,
            "kfdist_read_over_pyarrow": round(
                seconds["pyarrow_open_csv"] / seconds["kfdist_read_pass"], 2),
            "kfdist_read_over_pandas": round(
                seconds["pandas_chunks"] / seconds["kfdist_read_pass"], 2),
            "kfdist_over_csv_module": round(
                seconds["kfdist_csv_module"] / seconds["kfdist"], 2)}


def measure(examples: int, csv_bytes: int, log: Callable[[str], None]) -> Dict[str, Any]:
    """Every pair above; `examples` encoded and framed, a CSV of `csv_bytes` read."""
    import tensorflow as tf

    from kfdist.components.shard_dataset.example_encoding import CanonicalExampleEncoder

    with tempfile.TemporaryDirectory(prefix="kfdist-library-paths-") as root:
        log("library paths: Example encoding")
        encoding = measure_encoding(tf, examples)
        rng = np.random.default_rng(1)
        records = CanonicalExampleEncoder("image", 784).encode(
            rng.integers(0, 256, (examples, 28, 28), dtype=np.uint8), rng.integers(0, 10, examples))
        log("library paths: TFRecord framing")
        framing = measure_framing(tf, records, root)
        log("library paths: reading columns of Example shards")
        rng = np.random.default_rng(2)
        rows = CanonicalExampleEncoder("features", 4 * 120).encode(
            rng.normal(size=(examples // 4, 120)).astype(np.float32),
            rng.integers(0, 10, examples // 4),
            rng.choice(np.array(["red", "green", "blue", "S", "M", "L"]), (examples // 4, 2)))
        columns = measure_column_read(tf, rows, root)
        log("library paths: CSV reading")
        csv = measure_csv(csv_bytes, root)
    log("library paths: TensorFlow import")
    return {"encoding": encoding, "framing": framing, "columns": columns, "csv": csv,
            "import_seconds": measure_import()}
