"""A folder of PNG/JPEG files, one sub-folder per class, as a source; a table given as images.

Real files (PIL-encoded PNG and JPEG digits), real TensorFlow and Keras: the class names are
compared with what Keras's own `image_dataset_from_directory` calls the same folder, and the
shards are read back with the reader side of the contract and compared with the files' pixels.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import numpy as np
import pytest

from kfdist.components.common import dataset_spec as ds  # first: kfdist selects legacy Keras
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.shard_dataset import runtime

from fakes.image_files import DIGIT_CLASSES, encoded, write_image_folder
from fakes.source_files import read_split

import tensorflow as tf  # after kfdist (legacy Keras)

SORTED_CLASSES = tuple(sorted(DIGIT_CLASSES))


def quiet(_message: str) -> None:
    """A `log` that drops progress messages."""


def shard(source, out, **kwargs) -> ds.DatasetMetadata:
    kwargs = {"num_shards": 2, "num_eval_shards": 1, "eval_fraction": 0.25, **kwargs}
    return runtime.shard(str(source), str(out), source_format="images", log=quiet, **kwargs)


def file_examples(written) -> list:
    """`(pixel bytes, class name)` of every file, decoded by TensorFlow, sorted."""
    return sorted((tf.io.decode_image(tf.io.read_file(path)).numpy().tobytes(), name)
                  for path, name in written)


def stored_examples(root, meta: ds.DatasetMetadata, splits=ds.SPLITS) -> list:
    """`(pixel bytes, class name)` of the dataset's examples, read with `parse_fn`, sorted."""
    found = []
    for split in splits:
        images, labels = read_split(str(root), meta, split)
        found += [(image.tobytes(), meta.class_names[label])
                  for image, label in zip(images, labels.tolist())]
    return sorted(found)


def assert_nothing_written(tmp_path, out_name: str = "out") -> None:
    assert not [name for name in os.listdir(tmp_path) if name.startswith(out_name)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """3 classes x 20 digit pictures (PNG and JPEG), and what was written."""
    root = tmp_path_factory.mktemp("photos")
    return root, write_image_folder(str(root))


# --------------------------------------------------------------------------- the folder layout


def test_class_folders_become_class_names_in_keras_order(folder, tmp_path):
    root, written = folder
    meta = shard(root, tmp_path / "out")
    keras_names = tf.keras.utils.image_dataset_from_directory(
        str(root), image_size=(28, 28), color_mode="grayscale", batch_size=8).class_names
    assert meta.source_format == "image_folder"
    assert meta.class_names == tuple(keras_names) == SORTED_CLASSES
    assert meta.num_classes == len(DIGIT_CLASSES)
    assert meta.feature == ds.FeatureSpec(key=ds.IMAGE_KEY, dtype="uint8", shape=(28, 28, 1),
                                          encoding=meta.feature.encoding)
    assert meta.feature.encoding in ("png", "jpeg")
    assert meta.splits["train"].num_examples + meta.splits["eval"].num_examples == len(written)
    # Every file's pixels, under the class its folder names, and nothing else.
    assert stored_examples(tmp_path / "out", meta) == file_examples(written)
    # The class names survive metadata.json, as a table's string labels do.
    assert ds.load_metadata(str(tmp_path / "out")).class_names == SORTED_CLASSES


def test_split_folders_keep_their_split(tmp_path):
    written = write_image_folder(str(tmp_path / "photos"), per_class=8, splits=("train", "test"))
    meta = shard(tmp_path / "photos", tmp_path / "out")
    assert meta.split == ds.PREDEFINED_SPLIT
    assert meta.class_names == SORTED_CLASSES
    test_files = [(p, n) for p, n in written if f"{os.sep}test{os.sep}" in p]
    assert stored_examples(tmp_path / "out", meta, ["eval"]) == file_examples(test_files)
    assert meta.splits["train"].num_examples == len(written) - len(test_files)


def test_the_folder_on_gcs_shards_as_the_local_one(folder, gcs_emulator, tmp_path):
    root, written = folder
    gcs_emulator.create_bucket("kfdist-photos")
    gcs_emulator.upload_dir(str(root), "gs://kfdist-photos/photos")
    local = shard(root, tmp_path / "local")
    remote = shard("gs://kfdist-photos/photos", tmp_path / "remote")
    assert remote.source_format == "image_folder"
    assert remote.class_names == local.class_names == SORTED_CLASSES
    assert {s: remote.splits[s].num_examples for s in ds.SPLITS} == \
        {s: local.splits[s].num_examples for s in ds.SPLITS}
    assert stored_examples(tmp_path / "remote", remote) == file_examples(written)


def test_a_tfrecord_source_is_still_taken_as_images(tmp_path):
    with tf.io.TFRecordWriter(str(tmp_path / "digits.tfrecord")) as writer:
        for label in range(8):
            image = np.full((6, 6), label * 30, np.uint8)
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[encoded(image, "PNG")])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label % 2])),
            })).SerializeToString())
    meta = shard(tmp_path / "digits.tfrecord", tmp_path / "out", num_shards=1)
    assert meta.source_format == "tfrecord" and meta.class_names is None
    assert meta.feature.shape == (6, 6, 1)


# --------------------------------------------------------------------------- what is refused


def _png(shape) -> bytes:
    return tf.io.encode_png(np.zeros(shape, np.uint8)).numpy()


BAD_FILES = {
    "not_an_image_by_name": ("one/notes.txt", b"taken on a sunny day",
                             "'one/notes.txt' is not an image file"),
    "not_an_image_by_content": ("one/fake.png", b"just text",
                                "'one/fake.png' is named like an image but is not a PNG"),
    "truncated": ("one/000.png", None, "'one/000.png' is not a decodable PNG, JPEG"),
    "other_size": ("seven/big.png", (32, 32, 1),
                   r"'seven/big.png' is an image of shape \[32, 32, 1\], but the first image "
                   r"has shape \[28, 28, 1\]"),
    "not_in_a_class_folder": ("loose.png", (28, 28, 1), "'loose.png' is not in a class folder"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_file_is_named_in_one_line_before_writing(case, tmp_path):
    write_image_folder(str(tmp_path / "photos"), per_class=4)
    name, content, expected = BAD_FILES[case]
    path = tmp_path / "photos" / name
    if content is None:  # the first bytes of a real PNG: its signature, then nothing
        content = path.read_bytes()[:60]
    elif isinstance(content, tuple):
        content = _png(content)
    path.write_bytes(content)
    with pytest.raises(InvalidInputError, match=expected) as raised:
        shard(tmp_path / "photos", tmp_path / "out")
    assert "\n" not in str(raised.value)
    assert_nothing_written(tmp_path)


def test_tfrecord_settings_are_refused_for_a_folder(folder, tmp_path):
    root, _ = folder
    with pytest.raises(InvalidInputError, match="whose folders name the classes"):
        shard(root, tmp_path / "out", label_column="species")
    with pytest.raises(InvalidInputError, match="image_shape and image_feature apply to TFRecord"):
        shard(root, tmp_path / "out", image_feature="image")
    assert_nothing_written(tmp_path)


def _write_table(path) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([["x", "y", "label"], [1, 2, 0], [3, 4, 1]])
    return str(path)


@pytest.mark.parametrize("source,named", [("table.csv", "'table.csv' is a CSV table"),
                                          ("tables", "the files ['part-0.csv'] are a CSV table")])
def test_a_table_given_as_images_is_refused_in_one_line(source, named, tmp_path):
    _write_table(tmp_path / "table.csv")
    _write_table(tmp_path / "tables" / "part-0.csv")
    with pytest.raises(InvalidInputError) as raised:
        shard(tmp_path / source, tmp_path / "out")
    message = str(raised.value)
    assert message.startswith(named) and "\n" not in message
    assert "TFRecord files of tf.train.Example images" in message
    assert "one sub-folder of PNG/JPEG/GIF/BMP files per class" in message
    assert "tabular pipeline" in message
    assert_nothing_written(tmp_path)


def test_kfdist_run_images_refuses_a_csv_before_any_step(tmp_path):
    table = _write_table(tmp_path / "table.csv")
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "kfdist", "run", "images", "--data", table,
                           "--output", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("kfdist:")]
    assert lines == [lines[0]] and "'table.csv' is a CSV table, not images" in lines[0], \
        proc.stderr
    assert "Traceback" not in proc.stderr and "corrupted record" not in proc.stderr
    assert not out.exists()
