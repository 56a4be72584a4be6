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
* batched Example encoding, on table rows whose string columns take `DISTINCT_STRINGS` values
  each (so few rows repeat a combination and kfdist's cache of string framings mostly misses):
  kfdist's encoder against a `tf.train.Example` per row and against tfx_bsl's
  `RecordBatchToExamplesEncoder` (the batched path TFX itself uses, run in the peer
  environment on Arrow record batches of the same rows; the Examples checked equal as protos,
  since its bytes order the features by column, not by key);
* TFRecord framing: `tfrecord_framing.TFRecordFileWriter` (framing with
  google-crc32c, SHA-256 while writing) against `tf.io.TFRecordWriter` plus
  reading the file back for its SHA-256, which the dataset's metadata needs;
  uncompressed and GZIP (both compress with zlib's level 6, memory level 9: the
  same bytes, so GZIP is expected at parity, its cost being zlib's in both);
* reading Example shards: the evaluation's slice reader (`slices.read_shards`:
  the same framing read back, and a protobuf `Example` class, no TensorFlow)
  against `tf.data.TFRecordDataset` with `tf.io.parse_example`, two columns
  and the labels of a quarter as many table rows;
* CSV reading: the shard step's reader against pyarrow's and pandas' readers
  (`library_csv`).

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

from benchmarks.library_csv import measure_csv
from benchmarks.repeats import REPEATS, best_times

#: Rows of each block the encoders get (the shard step encodes a source batch at a time).
BLOCK = 4096
#: Distinct values of each string column in the batched-encoding rows.
DISTINCT_STRINGS = 1_000


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
    seconds = best_times(contenders)
    return {"examples": examples, "seconds": seconds,
            "images_kfdist_over_proto": round(seconds["images_proto"] / seconds["images_kfdist"], 1),
            "rows_kfdist_over_proto": round(seconds["rows_proto"] / seconds["rows_kfdist"], 1)}


def _distinct_rows(examples: int):
    """Table rows whose two string columns take `DISTINCT_STRINGS` values each:
    `(numbers, strings, labels)`."""
    rng = np.random.default_rng(3)
    values = np.array([f"value-{i}" for i in range(DISTINCT_STRINGS)])
    return (rng.normal(size=(examples, 120)).astype(np.float32),
            values[rng.integers(0, DISTINCT_STRINGS, (examples, 2))],
            rng.integers(0, 10, examples))


def _read_length_prefixed(path: str) -> List[bytes]:
    """The records `peers/tfx_encoding.py` wrote, each after its 8-byte length."""
    out = []
    with open(path, "rb") as f:
        while header := f.read(8):
            out.append(f.read(int.from_bytes(header, "little")))
    return out


def measure_batched_encoding(tf, examples: int, root: str,
                             log: Callable[[str], None]) -> Dict[str, Any]:
    """Table rows of many distinct strings: kfdist's encoder, a `tf.train.Example` per row, and
    tfx_bsl's `RecordBatchToExamplesEncoder` (in the peer environment)."""
    from benchmarks import peers
    from kfdist.components.shard_dataset.example_encoding import CanonicalExampleEncoder

    numbers, strings, labels = _distinct_rows(examples)
    encoder = CanonicalExampleEncoder("features", 4 * 120)
    contenders = {"kfdist": lambda: _in_blocks(lambda s: encoder.encode(
                      numbers[s], labels[s], strings[s]), examples),
                  "proto": lambda: _proto_rows(tf, numbers, strings, labels)}
    ours = contenders["kfdist"]()
    assert ours == contenders["proto"](), "row bytes differ"
    seconds = best_times(contenders)
    rows, out = os.path.join(root, "distinct-rows.npz"), os.path.join(root, "tfx-bsl.examples")
    np.savez(rows, numbers=numbers, strings=strings, labels=labels)
    peer = peers.run_tree([peers.peer_python(log), os.path.join(peers.HERE, "tfx_encoding.py"),
                           rows, out, str(REPEATS), str(BLOCK)], env=peers.peer_env())
    theirs = _read_length_prefixed(out)
    same = len(theirs) == len(ours) and all(
        tf.train.Example.FromString(a) == tf.train.Example.FromString(b)
        for a, b in zip(ours, theirs))
    seconds["tfx_bsl"] = peer["seconds"]
    return {"examples": examples, "distinct_strings": DISTINCT_STRINGS, "seconds": seconds,
            "same_examples": same,
            "kfdist_over_proto": round(seconds["proto"] / seconds["kfdist"], 1),
            "kfdist_over_tfx_bsl": round(seconds["tfx_bsl"] / seconds["kfdist"], 1)}


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

        seconds = best_times({"kfdist": kfdist_writer, "tf": tf_writer})
        same = (list(read_records(ours, compression)) == list(read_records(theirs, compression))
                == records)
        key = (compression or "none").lower()
        result[key] = {"seconds": seconds, "same_records": same,
                       "same_bytes": _sha256_of(ours) == _sha256_of(theirs),
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
    seconds = best_times({"kfdist": kfdist_read, "tf": tf_read})
    return {"examples": len(records), "seconds": seconds, "same_values": same,
            "kfdist_over_tf": round(seconds["tf"] / seconds["kfdist"], 2)}


def measure_import() -> Dict[str, float]:
    """Seconds to import TensorFlow in a fresh interpreter, and the shard step's own imports."""
    def import_seconds(module: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
        return time.perf_counter() - started
    return best_times({"tensorflow": lambda: import_seconds("tensorflow"),
                  "numpy_crc32c_pyarrow": lambda: import_seconds(
                      "numpy, google_crc32c, pyarrow.csv")})


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
        log("library paths: batched Example encoding, distinct strings (tfx_bsl's beside)")
        batched = measure_batched_encoding(tf, examples, root, log)
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
    return {"encoding": encoding, "batched_encoding": batched, "framing": framing,
            "columns": columns, "csv": csv,
            "import_seconds": measure_import()}
