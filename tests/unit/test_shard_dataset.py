"""shard_dataset runtime: real files, real TensorFlow, a real GCS emulator.

The shards are read back with the reader side of the contract
(`tf_features.parse_fn`) and compared with the source files read
independently with numpy / csv / protobuf.
"""

from __future__ import annotations

import collections
import csv
import ctypes
import gc
import gzip
import hashlib
import os
import re
import struct
import tracemalloc

import numpy as np
import pytest

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.common import dataset_spec, storage
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.shard_dataset import runtime
from kfdist.components.shard_dataset.example_encoding import CanonicalExampleEncoder
from kfdist.sample_data import write_mnist_sample

from fakes.source_files import (
    IMAGES_MAGIC, LABELS_MAGIC, read_split, synthetic_digits, write_idx, write_idx_pair)


def quiet(_message: str) -> None:
    """A `log` that drops progress messages."""


# ----------------------------------------------------------------------------- helpers


def read_idx_dir(directory: str) -> tuple:
    """All images and labels of an IDX directory, read with numpy."""
    images, labels = [], []
    for name in sorted(os.listdir(directory)):
        if "-images-" in name:
            with gzip.open(os.path.join(directory, name)) as f:
                n, rows, cols = struct.unpack(">III", f.read(16)[4:])
                images.append(np.frombuffer(f.read(), np.uint8).reshape(n, rows, cols))
            with gzip.open(os.path.join(directory, name.replace("-images-idx3", "-labels-idx1"))) as f:
                labels.append(np.frombuffer(f.read()[8:], np.uint8))
    return np.concatenate(images), np.concatenate(labels).astype(np.int64)


def multiset(inputs: np.ndarray, labels: np.ndarray) -> collections.Counter:
    """Examples as a multiset of (input bytes, label)."""
    return collections.Counter(
        (x.tobytes(), int(y)) for x, y in zip(np.ascontiguousarray(inputs), labels))


def split_multisets(root: str, meta) -> dict:
    return {split: multiset(*read_split(root, meta, split)) for split in dataset_spec.SPLITS}


def assert_nothing_written(output_dir: str) -> None:
    """Neither `output_dir` nor a temporary directory beside it exists."""
    assert not os.path.exists(output_dir)
    parent, name = os.path.split(output_dir.rstrip(os.sep))
    assert not [n for n in os.listdir(parent) if n.startswith(name + ".tmp-")]


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory) -> str:
    """The 1,797-digit sample as MNIST IDX files (train-* and t10k-*)."""
    out = str(tmp_path_factory.mktemp("mnist"))
    write_mnist_sample(out)
    return out


SAMPLE_ARGS = dict(num_shards=3, num_eval_shards=2, eval_fraction=0.2, seed=42)


@pytest.fixture(scope="module")
def sharded_sample(mnist_dir, tmp_path_factory):
    """`(output_dir, metadata, log lines)` of sharding the sample with SAMPLE_ARGS."""
    out = os.path.join(str(tmp_path_factory.mktemp("sharded")), "dataset")
    lines = []
    meta = runtime.shard(mnist_dir, out, log=lines.append, **SAMPLE_ARGS)
    return out, meta, lines


@pytest.fixture
def small_idx(tmp_path) -> str:
    """A valid 40-example IDX directory."""
    images, labels = synthetic_digits(40)
    write_idx_pair(str(tmp_path / "small"), images, labels)
    return str(tmp_path / "small")


# ----------------------------------------------------------------------------- MNIST IDX


def test_sample_shards_are_balanced_complete_and_described(sharded_sample, mnist_dir):
    out, meta, lines = sharded_sample
    assert meta == dataset_spec.load_metadata(out)
    assert meta.source_format == "mnist_idx" and meta.num_classes == 10
    assert meta.feature == dataset_spec.FeatureSpec(key="image", dtype="uint8", shape=(28, 28))
    assert meta.preprocessing == dataset_spec.Preprocessing(kind="scale", scale=1 / 255, offset=0.0)
    for split, shards in (("train", 3), ("eval", 2)):
        counts = [s.num_examples for s in meta.splits[split].shards]
        assert len(counts) == shards and max(counts) - min(counts) <= 1
        assert sum(counts) == meta.splits[split].num_examples
        for info in meta.splits[split].shards:
            data = open(os.path.join(out, info.path), "rb").read()
            assert info.sha256 == hashlib.sha256(data).hexdigest()
            assert info.num_bytes == len(data)
            assert re.fullmatch(rf"{split}/shard-\d{{5}}-of-0000{shards}\.tfrecord", info.path)
    assert sorted(os.listdir(out)) == ["eval", "metadata.json", "train"]
    assert not [n for n in os.listdir(os.path.dirname(out)) if ".tmp-" in n]
    assert any("wrote train/shard-00000-of-00003" in line for line in lines)
    # Every source example is in exactly one split, pixels and label intact.
    images, labels = read_idx_dir(mnist_dir)
    got = split_multisets(out, meta)
    assert got["train"] + got["eval"] == multiset(images, labels)
    assert 0.15 < meta.splits["eval"].num_examples / len(labels) < 0.25


def test_split_membership_depends_on_content_only(sharded_sample, mnist_dir, tmp_path):
    out, meta, _ = sharded_sample
    rerun = runtime.shard(mnist_dir, str(tmp_path / "rerun"), log=quiet, **SAMPLE_ARGS)
    assert rerun.splits == meta.splits  # same seed: byte-identical shards
    other = runtime.shard(mnist_dir, str(tmp_path / "seed7"), log=quiet,
                          **{**SAMPLE_ARGS, "seed": 7})
    assert split_multisets(str(tmp_path / "seed7"), other) == split_multisets(out, meta)
    assert [s.sha256 for s in other.splits["train"].shards] != \
        [s.sha256 for s in meta.splits["train"].shards]  # ... only the order changed


def test_gzip_compression_holds_the_same_examples(sharded_sample, mnist_dir, tmp_path):
    out, meta, _ = sharded_sample
    gz = runtime.shard(mnist_dir, str(tmp_path / "gz"), compression="gzip", log=quiet,
                       **SAMPLE_ARGS)
    assert gz.compression == "GZIP"
    for info in gz.splits["train"].shards:
        assert info.path.endswith(".tfrecord.gz")
        assert open(tmp_path / "gz" / info.path, "rb").read(2) == b"\x1f\x8b"
    assert split_multisets(str(tmp_path / "gz"), gz) == split_multisets(out, meta)


def test_tfrecord_images_reshard_into_the_same_splits(sharded_sample, tmp_path):
    out, meta, _ = sharded_sample  # a kfdist dataset is itself a TFRecord source
    again = runtime.shard(out, str(tmp_path / "again"), image_shape=[28, 28], num_shards=2,
                          log=quiet)
    assert again.source_format == "tfrecord" and again.feature == meta.feature
    assert split_multisets(str(tmp_path / "again"), again) == split_multisets(out, meta)


def test_encoder_matches_protobuf_serialization():
    import tensorflow as tf

    rng = np.random.default_rng(0)
    labels = np.array([0, 9, 127, 128, 300, 2 ** 40])
    images = rng.integers(0, 256, (len(labels), 5, 3), dtype=np.uint8)
    vectors = rng.normal(size=(len(labels), 7)).astype(np.float32)
    for key, inputs, value in (
            ("image", images, lambda x: tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[x.tobytes()]))),
            ("features", vectors, lambda x: tf.train.Feature(
                float_list=tf.train.FloatList(value=x.tolist())))):
        encoded = CanonicalExampleEncoder(key, inputs[0].nbytes).encode(inputs, labels)
        for x, y, got in zip(inputs, labels, encoded):
            want = tf.train.Example(features=tf.train.Features(feature={
                key: value(x),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(y)]))}))
            assert got == want.SerializeToString(deterministic=True)


# ----------------------------------------------------------------------------- CSV, TFRecord


def write_csv(path: str, header, rows) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def test_csv_class_names_and_standardisation_match_numpy(tmp_path):
    rng = np.random.default_rng(1)
    n = 500
    x1, x2 = rng.normal(5.0, 2.0, n), rng.uniform(-1, 1, n)
    names = np.array(["dog", "cat", "bird"])[rng.integers(0, 3, n)]
    rows = [[f"{a:.6f}", name, f"{b:.6f}", "3.5"] for a, name, b in zip(x1, names, x2)]
    write_csv(str(tmp_path / "data.csv"), ["x1", "species", "x2", "const"], rows)
    meta = runtime.shard(str(tmp_path / "data.csv"), str(tmp_path / "out"),
                         label_column="species", num_shards=2, log=quiet)
    assert meta.source_format == "csv"
    assert meta.class_names == ("bird", "cat", "dog") and meta.num_classes == 3
    assert meta.feature == dataset_spec.FeatureSpec(
        key="features", dtype="float32", shape=(3,), columns=("x1", "x2", "const"))
    train_x, _ = read_split(str(tmp_path / "out"), meta, "train")
    assert len(train_x) == meta.splits["train"].num_examples
    assert meta.preprocessing.kind == "standardize"
    np.testing.assert_allclose(meta.preprocessing.mean, train_x.astype(np.float64).mean(0),
                               rtol=1e-6)
    np.testing.assert_allclose(meta.preprocessing.std[:2], train_x[:, :2].astype(np.float64).std(0),
                               rtol=1e-6)
    assert meta.preprocessing.std[2] == 1.0  # constant column
    source = np.array([[float(r[0]), float(r[2]), 3.5] for r in rows], np.float32)
    source_labels = np.searchsorted(["bird", "cat", "dog"], names)
    got = split_multisets(str(tmp_path / "out"), meta)
    assert got["train"] + got["eval"] == multiset(source, source_labels)


def test_csv_integer_labels_are_classes_by_their_numbers(tmp_path):
    """Labels 0, 2, 4, 6 are 4 classes named by their numbers (not 7 outputs, 3 never seen);
    labels 0..k-1 are their own ids."""
    rows = [[str(i % 4 * 2), f"{i * 0.5}"] for i in range(60)]
    write_csv(str(tmp_path / "d.csv"), ["label", "v"], rows)
    meta = runtime.shard(str(tmp_path), str(tmp_path / "out"), num_shards=2, log=quiet)
    assert meta.num_classes == 4 and meta.class_names == ("0", "2", "4", "6")
    os.makedirs(tmp_path / "ids")
    write_csv(str(tmp_path / "ids" / "d.csv"), ["label", "v"],
              [[str(int(r[0]) // 2), r[1]] for r in rows])
    meta = runtime.shard(str(tmp_path / "ids"), str(tmp_path / "out-ids"), num_shards=2, log=quiet)
    assert meta.num_classes == 4 and meta.class_names is None


def test_tfrecord_numeric_features_plain_and_gzip(tmp_path):
    import tensorflow as tf

    rng = np.random.default_rng(2)
    expected = []
    for name, options in (("a.tfrecord.gz", "GZIP"), ("b.tfrecord", "")):
        with tf.io.TFRecordWriter(str(tmp_path / name), options) as w:
            for _ in range(150):
                a, b, y = int(rng.integers(-5, 5)), rng.normal(size=2), int(rng.integers(0, 3))
                w.write(tf.train.Example(features=tf.train.Features(feature={
                    "b": tf.train.Feature(float_list=tf.train.FloatList(value=b)),
                    "a": tf.train.Feature(int64_list=tf.train.Int64List(value=[a])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[y])),
                })).SerializeToString())
                expected.append(([a, *b], y))
    meta = runtime.shard(str(tmp_path), str(tmp_path / "out"), num_shards=2, log=quiet)
    assert meta.feature.columns == ("a", "b[0]", "b[1]") and meta.num_classes == 3
    got = split_multisets(str(tmp_path / "out"), meta)
    want = multiset(np.array([x for x, _ in expected], np.float32), [y for _, y in expected])
    assert got["train"] + got["eval"] == want


# ----------------------------------------------------------------------------- bad inputs


def _csv(tmp_path, header, rows) -> str:
    write_csv(str(tmp_path / "bad.csv"), header, rows)
    return str(tmp_path / "bad.csv")


def _idx(tmp_path, images_dims=(20, 28, 28), labels_dims=(20,), images_bytes=None,
         labels_bytes=None, images_magic=IMAGES_MAGIC, with_labels=True) -> str:
    d = tmp_path / "idx"
    d.mkdir()
    n_img = images_bytes if images_bytes is not None else int(np.prod(images_dims))
    write_idx(str(d / "train-images-idx3-ubyte.gz"), images_magic, images_dims, bytes(n_img))
    if with_labels:
        n_lab = labels_bytes if labels_bytes is not None else labels_dims[0]
        write_idx(str(d / "train-labels-idx1-ubyte.gz"), LABELS_MAGIC, labels_dims, bytes(n_lab))
    return str(d)


def _damaged_gzip(tmp_path, damage) -> str:
    d = _idx(tmp_path)
    path = os.path.join(d, "train-images-idx3-ubyte.gz")
    data = bytearray(open(path, "rb").read())
    open(path, "wb").write(damage(data))
    return d


def _flip_crc(data: bytearray) -> bytes:
    data[-8] ^= 0xFF  # gzip trailer: CRC32, then size
    return bytes(data)


def _tfrecord_with_bytes(tmp_path) -> str:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(tmp_path / "x.tfrecord")) as w:
        w.write(tf.train.Example(features=tf.train.Features(feature={
            "png": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"abc"])),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))})).SerializeToString())
    return str(tmp_path / "x.tfrecord")


BAD_INPUTS = {
    # name: (make source, shard() kwargs, substrings the message must contain)
    "missing source": (lambda t: str(t / "no-such-dir"), {}, ["no-such-dir"]),
    "count mismatch": (lambda t: _idx(t, labels_dims=(19,)), {}, ["20 images", "19 labels"]),
    "truncated data": (lambda t: _idx(t, images_bytes=19 * 784), {},
                       ["train-images-idx3-ubyte.gz", "truncated"]),
    "gzip crc": (lambda t: _damaged_gzip(t, _flip_crc), {}, ["corrupt gzip", "CRC"]),
    "gzip cut short": (lambda t: _damaged_gzip(t, lambda d: bytes(d[:len(d) // 2])), {},
                       ["corrupt gzip", "train-images-idx3-ubyte.gz"]),
    "bad magic": (lambda t: _idx(t, images_magic=2052), {}, ["2052", "2051"]),
    "labels missing": (lambda t: _idx(t, with_labels=False), {}, ["train-labels-idx1-ubyte.gz"]),
    "csv without label": (lambda t: _csv(t, ["a", "b", "c"], [[1, 2, 3]]), {},
                          ["'label'", "['a', 'b', 'c']"]),
    "csv non-numeric": (lambda t: _csv(t, ["a", "label", "b"], [[1, 0, 2], [1, 1, 2], [3, 0, "abc"]]),
                        {"num_shards": 1}, ["line 4", "'b'", "'abc'"]),
    "num_shards 0": (lambda t: _idx(t), {"num_shards": 0}, ["num_shards", "0"]),
    "num_eval_shards 0": (lambda t: _idx(t), {"num_eval_shards": 0}, ["num_eval_shards", "0"]),
    "eval_fraction 0": (lambda t: _idx(t), {"eval_fraction": 0.0}, ["eval_fraction", "0.0"]),
    "eval_fraction 1.5": (lambda t: _idx(t), {"eval_fraction": 1.5}, ["eval_fraction", "1.5"]),
    "unknown format": (lambda t: _idx(t), {"source_format": "parquet"}, ["'parquet'", "'csv'"]),
    "unknown compression": (lambda t: _idx(t), {"compression": "ZLIB"}, ["'ZLIB'", "'GZIP'"]),
    "fewer examples than shards": (lambda t: _idx(t), {"num_shards": 30},
                                   ["num_shards=30", "train split"]),
    "bytes without image_shape": (_tfrecord_with_bytes, {}, ["['png']", "image_shape"]),
    "image bytes of the wrong size": (_tfrecord_with_bytes, {"image_shape": [2, 2]},
                                      ["'png'", "3 bytes", "[2, 2] needs 4"]),
    "image_shape mismatch": (lambda t: _idx(t), {"image_shape": [32, 32]}, ["[32, 32]", "[28, 28]"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_named_and_nothing_is_written(case, tmp_path):
    make_source, kwargs, expected = BAD_INPUTS[case]
    source = make_source(tmp_path)
    out = str(tmp_path / "out")
    with pytest.raises(InvalidInputError) as err:
        runtime.shard(source, out, log=quiet, **kwargs)
    for text in expected:
        assert text in str(err.value)
    assert_nothing_written(out)


def test_existing_output_is_refused_and_kept(small_idx, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    with pytest.raises(InvalidInputError, match="already exists and is not empty"):
        runtime.shard(small_idx, str(out), num_shards=1, log=quiet)
    assert os.listdir(out) == ["precious.txt"] and (out / "precious.txt").read_text() == "keep me"


def test_empty_output_dir_is_filled(small_idx, tmp_path):
    (tmp_path / "out").mkdir()
    meta = runtime.shard(small_idx, str(tmp_path / "out"), num_shards=2, log=quiet)
    assert dataset_spec.load_metadata(str(tmp_path / "out")) == meta


# ----------------------------------------------------------------------------- crashes


@pytest.mark.parametrize("where", ["encode", "metadata"])
def test_crash_while_writing_leaves_no_dataset(where, small_idx, tmp_path, monkeypatch):
    calls = []

    def crash(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("injected crash")

    if where == "encode":
        original = CanonicalExampleEncoder.encode

        def encode_then_crash(self, inputs, labels, categorical=None):
            if calls:
                crash()
            calls.append(0)
            return original(self, inputs, labels, categorical)

        monkeypatch.setattr(CanonicalExampleEncoder, "encode", encode_then_crash)
    else:
        monkeypatch.setattr(runtime, "write_metadata", crash)
    out = str(tmp_path / "out")
    with pytest.raises(RuntimeError, match="injected crash"):
        runtime.shard(small_idx, out, num_shards=2, log=quiet)
    assert 1 in calls
    assert_nothing_written(out)


# ----------------------------------------------------------------------------- memory


def _return_free_heap_to_os() -> None:
    """glibc keeps freed memory mapped; trim it so peak RSS counts live memory only."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _peak_memory_of_sharding(source: str, out: str) -> tuple:
    """`(peak Python heap bytes, peak RSS bytes)` while sharding `source`."""
    assert os.access("/proc/self/clear_refs", os.W_OK), (
        "/proc/self/clear_refs is not writable: the peak RSS cannot be reset, so it cannot be "
        "measured per run (Linux with procfs needed)")
    gc.collect()
    _return_free_heap_to_os()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets the peak RSS (VmHWM) of this process
    tracemalloc.start()
    try:
        runtime.shard(source, out, num_shards=2, shuffle_buffer_size=256, log=quiet)
        python_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    status = open("/proc/self/status").read()
    return python_peak, int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024


def test_memory_does_not_grow_with_the_dataset(tmp_path):
    n = 5_000
    images, labels = synthetic_digits(5 * n)
    write_idx_pair(str(tmp_path / "1x"), images[:n], labels[:n])
    write_idx_pair(str(tmp_path / "5x"), images, labels)
    del images, labels
    runtime.shard(str(tmp_path / "1x"), str(tmp_path / "warmup"), num_shards=2, log=quiet)  # imports
    heap_1x, rss_1x = _peak_memory_of_sharding(str(tmp_path / "1x"), str(tmp_path / "out1"))
    heap_5x, rss_5x = _peak_memory_of_sharding(str(tmp_path / "5x"), str(tmp_path / "out5"))
    # Holding the 4n extra examples would cost over 16 MB (4n records of ~830 bytes);
    # measured growth: < 0.1 MB of Python heap, 2-5 MB of RSS (TensorFlow's own buffers).
    assert heap_5x - heap_1x < 2 * 2 ** 20, (heap_1x, heap_5x)
    assert rss_5x - rss_1x < 10 * 2 ** 20, (rss_1x, rss_5x)


# ----------------------------------------------------------------------------- gs://


def test_gcs_input_and_output(gcs_emulator, sharded_sample, mnist_dir, tmp_path, monkeypatch):
    _, local_meta, _ = sharded_sample
    gcs_emulator.create_bucket("kfdist-test")
    gcs_emulator.upload_dir(mnist_dir, "gs://kfdist-test/mnist")
    uploads = []
    upload_dir = storage.upload_dir
    monkeypatch.setattr(storage, "upload_dir", lambda d, uri: (
        uploads.append(sorted(os.listdir(d))), upload_dir(d, uri)))
    meta = runtime.shard("gs://kfdist-test/mnist", "gs://kfdist-test/datasets/digits",
                         log=quiet, **SAMPLE_ARGS)
    assert meta.splits == local_meta.splits and meta.source_uri == "gs://kfdist-test/mnist"
    assert uploads[-1] == ["metadata.json"] and "metadata.json" not in uploads[0]
    objects = gcs_emulator.list("gs://kfdist-test/datasets/digits/")
    assert len(objects) == 1 + 3 + 2
    local = gcs_emulator.download_dir("gs://kfdist-test/datasets/digits", str(tmp_path / "dl"))
    assert dataset_spec.load_metadata(local) == meta
    for info in meta.splits["train"].shards + meta.splits["eval"].shards:
        assert hashlib.sha256(open(os.path.join(local, info.path), "rb").read()).hexdigest() \
            == info.sha256
    with pytest.raises(InvalidInputError, match="already exists"):
        runtime.shard("gs://kfdist-test/mnist", "gs://kfdist-test/datasets/digits", log=quiet)
    with pytest.raises(InvalidInputError, match="gs://kfdist-test/nothing"):
        runtime.shard("gs://kfdist-test/nothing", str(tmp_path / "out"), log=quiet)
    with pytest.raises(InvalidInputError, match="bucket 'no-bucket'"):
        runtime.shard("gs://no-bucket/mnist", str(tmp_path / "out"), log=quiet)
    with pytest.raises(InvalidInputError, match="bucket 'no-bucket'"):
        runtime.shard("gs://kfdist-test/mnist", "gs://no-bucket/out", log=quiet)
    assert_nothing_written(str(tmp_path / "out"))
