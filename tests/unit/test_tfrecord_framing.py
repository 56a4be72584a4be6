"""The shard writer's own TFRecord framing against TensorFlow's writer and reader."""

import hashlib
import os

import pytest
import tensorflow as tf

from kfdist.components.common.tfrecord_framing import TFRecordFileWriter, frame_all, gzip_bytes

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


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_the_bytes_equal_tensorflows_writer(tmp_path, compression):
    """Uncompressed, and gzipped with TensorFlow's zlib settings: the same file, byte for byte."""
    ours = _write(str(tmp_path / "ours"), compression)
    with tf.io.TFRecordWriter(str(tmp_path / "tf"), options=compression) as writer:
        for record in RECORDS:
            writer.write(record)
    data = (tmp_path / "ours").read_bytes()
    assert data == (tmp_path / "tf").read_bytes()
    assert data == (gzip_bytes(frame_all(RECORDS)) if compression else frame_all(RECORDS))
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


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_the_reader_reads_what_tensorflows_writer_wrote(tmp_path, compression):
    from kfdist.components.common.tfrecord_framing import read_records

    path = str(tmp_path / "tf")
    with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type=compression or "")) as w:
        for record in RECORDS:
            w.write(record)
    assert list(read_records(path, compression)) == RECORDS


@pytest.mark.parametrize("where, message", [
    (3, "the length of record 0 of TFRecord file"),  # a byte of the first length
    (16 + 3, "the length of record 1 of"),  # the second record's length (record 0: 16 bytes)
    (-10, "does not match its CRC: the file is corrupted"),  # inside the last record's bytes
])
def test_the_reader_refuses_a_corrupted_record_naming_it(tmp_path, where, message):
    from kfdist.components.common.errors import InvalidInputError
    from kfdist.components.common.tfrecord_framing import read_records

    data = bytearray(frame_all(RECORDS))
    data[where] ^= 0x01
    (tmp_path / "bad").write_bytes(bytes(data))
    with pytest.raises(InvalidInputError, match=message):
        list(read_records(str(tmp_path / "bad")))
    with tf.device("CPU"), pytest.raises(tf.errors.DataLossError):  # TensorFlow refuses it too
        list(tf.data.TFRecordDataset(str(tmp_path / "bad")))


def test_the_reader_refuses_a_truncated_file(tmp_path):
    from kfdist.components.common.errors import InvalidInputError
    from kfdist.components.common.tfrecord_framing import read_records

    data = frame_all(RECORDS)
    for cut in (5, 16 + 13, len(data) - 2):  # in a header, in the data, in the last footer
        (tmp_path / "cut").write_bytes(data[:cut])
        with pytest.raises(InvalidInputError, match="ends inside record .*truncated"):
            list(read_records(str(tmp_path / "cut")))


def test_the_example_class_parses_what_tensorflow_serialises_and_back():
    from kfdist.components.common.example_proto import Example

    example = tf.train.Example(features=tf.train.Features(feature={
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[2, -(2 ** 40)])),
        "features": tf.train.Feature(float_list=tf.train.FloatList(value=[1.5, float("nan"), -3])),
        "categorical": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"Biscoe", b""])),
        "empty": tf.train.Feature()}))
    data = example.SerializeToString()
    ours = Example.FromString(data)
    feature = ours.features.feature
    assert list(feature["label"].int64_list.value) == [2, -(2 ** 40)]
    values = list(feature["features"].float_list.value)
    assert values[0] == 1.5 and values[1] != values[1] and values[2] == -3
    assert list(feature["categorical"].bytes_list.value) == [b"Biscoe", b""]
    assert feature["label"].WhichOneof("kind") == "int64_list"
    assert feature["empty"].WhichOneof("kind") is None
    assert tf.train.Example.FromString(ours.SerializeToString()) == example
