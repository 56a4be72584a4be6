"""Split keys, batch checksums and encoded records equal their per-value definitions.

`scan.example_keys` and `scan.batch_checksum` hash whole batches at once and
the encoder frames each combination of strings and label once; these tests
spell out the definitions one example and one value at a time (what the split
of every existing dataset was computed with) and compare.
"""

from __future__ import annotations

import hashlib
import zlib

import numpy as np
import pytest

from kfdist.components.common import dataset_spec as ds  # first: kfdist selects legacy Keras
from kfdist.components.shard_dataset import scan
from kfdist.components.shard_dataset.example_encoding import CanonicalExampleEncoder
from kfdist.components.shard_dataset.source import ExampleBatch

import tensorflow as tf  # after kfdist (legacy Keras)


def reference_strings(batch: ExampleBatch):
    return [b"".join(v.encode() + b"\0" for v in row) for row in batch.categorical.tolist()]


def reference_keys(batch: ExampleBatch):
    raw = np.ascontiguousarray(batch.inputs).tobytes()
    labels = batch.labels.astype("<i8").tobytes()
    size = len(raw) // max(len(batch.labels), 1)
    strings = reference_strings(batch) if batch.categorical is not None else None
    keys = []
    for i in range(len(batch.labels)):
        h = hashlib.blake2b(raw[i * size:(i + 1) * size], digest_size=8)
        if strings is not None:
            h.update(strings[i])
        h.update(labels[i * 8:(i + 1) * 8])
        keys.append(h.digest())
    return keys


def reference_checksum(batch: ExampleBatch) -> int:
    crc = zlib.crc32(np.ascontiguousarray(batch.inputs).data)
    if batch.categorical is not None:
        crc = zlib.crc32(b"".join(reference_strings(batch)), crc)
    return zlib.crc32(np.ascontiguousarray(batch.labels).data, crc)


def batches():
    rng = np.random.default_rng(3)
    words = np.array(["red", "", "café", "a\0b", "日本", "NA", "x" * 300], dtype=object)
    features = rng.normal(size=(300, 5)).astype(np.float32)
    features[rng.random(features.shape) < 0.1] = np.nan
    labels = rng.integers(0, 300, 300)
    yield "features", ExampleBatch(features, labels, "f")
    yield "features slice", ExampleBatch(features[100:250], labels[100:250], "f")
    yield "strings", ExampleBatch(features, labels, "f", words[rng.integers(0, 7, (300, 3))])
    yield "strings only", ExampleBatch(np.zeros((300, 0), np.float32), labels, "f",
                                       words[rng.integers(0, 7, (300, 1))])
    yield "no strings", ExampleBatch(features, labels, "f", np.empty((300, 0), dtype=object))
    yield "images", ExampleBatch(rng.integers(0, 256, (64, 7, 7), dtype=np.uint8),
                                 labels[:64], "f")
    yield "empty", ExampleBatch(features[:0], labels[:0], "f", words[:0].reshape(0, 1))


@pytest.mark.parametrize("name, batch", list(batches()), ids=[n for n, _ in batches()])
def test_keys_and_checksums_equal_their_definition(name, batch):
    assert scan.example_keys(batch) == reference_keys(batch)
    assert scan.batch_checksum(batch) == reference_checksum(batch)
    if batch.categorical is not None:
        assert scan.categorical_bytes(batch) == reference_strings(batch)


def test_encoded_records_with_strings_equal_protobuf():
    rng = np.random.default_rng(5)
    words = np.array(["red", "", "café", "dark, blue", "x" * 200], dtype=object)
    for width in (3, 0):
        encoder = CanonicalExampleEncoder(ds.FEATURES_KEY, 4 * width)
        for rows in (50, 0, 7):  # the cache of framings is reused across calls
            inputs = rng.normal(size=(rows, width)).astype(np.float32)
            labels = rng.integers(0, 200, rows)
            strings = words[rng.integers(0, 5, (rows, 2))]
            want = []
            for x, y, s in zip(inputs, labels, strings):
                feature = {
                    ds.LABEL_KEY: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(y)])),
                    ds.CATEGORICAL_KEY: tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[v.encode() for v in s])),
                    ds.FEATURES_KEY: tf.train.Feature(float_list=tf.train.FloatList(
                        value=x.tolist())),
                }
                want.append(tf.train.Example(features=tf.train.Features(
                    feature=feature)).SerializeToString(deterministic=True))
            assert encoder.encode(inputs, labels, strings) == want
            if width:
                assert encoder.encode(inputs, labels) == [
                    tf.train.Example(features=tf.train.Features(feature={
                        ds.LABEL_KEY: tf.train.Feature(
                            int64_list=tf.train.Int64List(value=[int(y)])),
                        ds.FEATURES_KEY: tf.train.Feature(
                            float_list=tf.train.FloatList(value=x.tolist()))})).SerializeToString(
                                deterministic=True) for x, y in zip(inputs, labels)]
