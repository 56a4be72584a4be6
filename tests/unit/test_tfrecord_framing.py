"""The shard writer's own TFRecord framing against TensorFlow's writer and reader."""

import hashlib
import os

import pytest
import tensorflow as tf

from kfdist.components.shard_dataset.tfrecord_framing import TFRecordFileWriter, frame_all

RECORDS = [b"", b"x", os.urandom(5), os.urandom(300), os.urandom(70_000)] * 40


def _write(path, compression):
    writer = TFRecordFileWriter(path, compression)
    half = len(RECORDS) // 2
    for record in RECORDS[:half]:
        writer.write(record)
    for start in range(half, len(RECORDS), 7):  # then in runs, as the shard writer writes
        writer.write_many(RECORDS[start:start + 7])
    writer.close()
    writer.close()  # idempotent
    return writer


def test_uncompressed_bytes_equal_tensorflows_writer(tmp_path):
    ours = _write(str(tmp_path / "ours"), None)
    with tf.io.TFRecordWriter(str(tmp_path / "tf")) as writer:
        for record in RECORDS:
            writer.write(record)
    data = (tmp_path / "ours").read_bytes()
    assert data == (tmp_path / "tf").read_bytes()
    assert data == frame_all(RECORDS)
    assert ours.num_bytes == len(data)
    assert ours.sha256 == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_tensorflow_reads_every_record_back(tmp_path, compression):
    path = str(tmp_path / "shard")
    writer = _write(path, compression)
    back = [r.numpy() for r in tf.data.TFRecordDataset(path, compression or "")]
    assert back == RECORDS
    data = open(path, "rb").read()
    assert writer.sha256 == hashlib.sha256(data).hexdigest() and writer.num_bytes == len(data)


def test_gzip_files_are_reproducible(tmp_path):
    _write(str(tmp_path / "a"), "GZIP")
    _write(str(tmp_path / "b"), "GZIP")
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()


def test_a_corrupted_record_fails_tensorflows_crc_check(tmp_path):
    path = tmp_path / "shard"
    _write(str(path), None)
    data = bytearray(path.read_bytes())
    data[20] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(str(path)))
