"""Image sources: TFRecords of encoded (PNG, JPEG) or raw images; `image_cnn`; the `images` sample.

Real files and real TensorFlow: the shards are read back with the reader side
of the contract (`tf_features.parse_fn`) and compared with the source pixels.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from kfdist.components.common import dataset_spec as ds  # first: kfdist selects legacy Keras
from kfdist.components.common import tf_features
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.shard_dataset import runtime
from kfdist.components.shard_dataset.source import ReaderOptions
from kfdist.components.shard_dataset.tfrecord_reader import open_tfrecord_source
from kfdist.components.train_distributed.replica import models
from kfdist.sample_data import IMAGES_TEST, IMAGES_TRAIN, digits_as_mnist, write_images_sample

import tensorflow as tf  # after kfdist (legacy Keras)


def quiet(_message: str) -> None:
    """A `log` that drops progress messages."""


def example(**features) -> bytes:
    """A serialized `tf.train.Example`: bytes values as bytes_list, ints as int64_list."""
    feature = {key: tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
               if isinstance(value, bytes)
               else tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
               for key, value in features.items()}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_records(path, records, compression: str = "") -> str:
    with tf.io.TFRecordWriter(str(path), tf.io.TFRecordOptions(compression_type=compression)) as w:
        for record in records:
            w.write(record)
    return str(path)


def random_images(n: int, shape, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, *shape), dtype=np.uint8)


def png(image: np.ndarray) -> bytes:
    return tf.io.encode_png(image).numpy()


def stored_examples(root: str, meta: ds.DatasetMetadata):
    """Every `(pixel bytes, label)` of both splits, sorted, read with `parse_fn`."""
    parse = tf_features.parse_fn(meta)
    found = []
    for split in ds.SPLITS:
        for path in meta.shard_paths(root, split):
            records = tf.data.TFRecordDataset(path, tf_features.compression_type(meta))
            for x, y in records.batch(64).map(parse):
                assert x.shape[1:] == meta.feature.shape
                found += [(a.tobytes(), int(b)) for a, b in zip(x.numpy(), y.numpy())]
    return sorted(found)


def shard(source, out, **kwargs) -> ds.DatasetMetadata:
    kwargs = {"num_shards": 1, "num_eval_shards": 1, "eval_fraction": 0.5, **kwargs}
    return runtime.shard(str(source), str(out), source_format="tfrecord", log=quiet, **kwargs)


def assert_nothing_written(tmp_path, out_name: str = "out") -> None:
    assert not [name for name in os.listdir(tmp_path) if name.startswith(out_name)]


# ----------------------------------------------------------------------------- encoded images


def test_png_source_keeps_its_shape_and_pixels(tmp_path):
    images = random_images(12, (12, 16, 3))
    labels = [i % 3 for i in range(12)]
    write_records(tmp_path / "a.tfrecord",
                  [example(image=png(im), label=y) for im, y in zip(images, labels)])
    meta = shard(tmp_path / "a.tfrecord", tmp_path / "out")
    assert meta.feature == ds.FeatureSpec(key=ds.IMAGE_KEY, dtype="uint8", shape=(12, 16, 3),
                                          encoding="png")
    assert ds.load_metadata(str(tmp_path / "out")).feature == meta.feature
    assert meta.num_classes == 3
    assert stored_examples(str(tmp_path / "out"), meta) == sorted(
        (im.tobytes(), y) for im, y in zip(images, labels))


def test_jpeg_source_stores_the_decoded_pixels(tmp_path):
    images = random_images(10, (10, 8, 1), seed=1)
    jpegs = [tf.io.encode_jpeg(im, quality=90).numpy() for im in images]
    path = write_records(tmp_path / "digits.tfrecord.gz",
                         [example(image=j, label=i % 2) for i, j in enumerate(jpegs)], "GZIP")
    meta = shard(path, tmp_path / "out")
    assert meta.feature.shape == (10, 8, 1) and meta.feature.encoding == "jpeg"
    expected = sorted((tf.io.decode_jpeg(j).numpy().tobytes(), i % 2) for i, j in enumerate(jpegs))
    assert stored_examples(str(tmp_path / "out"), meta) == expected


# ----------------------------------------------------------------------------- raw pixels


@pytest.mark.parametrize("keys, shape", [
    (("height", "width", "channels"), (5, 4, 3)),
    (("image/height", "image/width", None), (5, 4, 1)),
])
def test_raw_pixels_take_their_shape_from_height_and_width_features(keys, shape, tmp_path):
    images = random_images(8, shape, seed=2)
    height, width, channels = keys
    records = []
    for i, im in enumerate(images):
        dims = {height: shape[0], width: shape[1], **({channels: shape[2]} if channels else {})}
        records.append(example(pixels=im.tobytes(), label=i % 2, **dims))
    meta = shard(write_records(tmp_path / "raw.tfrecord", records), tmp_path / "out")
    assert meta.feature == ds.FeatureSpec(key=ds.IMAGE_KEY, dtype="uint8", shape=shape)
    assert stored_examples(str(tmp_path / "out"), meta) == sorted(
        (im.tobytes(), i % 2) for i, im in enumerate(images))


# ----------------------------------------------------------------------------- rejected sources


def _png_files_with_a_smaller_image(tmp_path) -> str:
    images = random_images(5, (12, 16, 3), seed=3)
    (tmp_path / "src").mkdir()
    write_records(tmp_path / "src" / "a.tfrecord",
                  [example(image=png(im), label=0) for im in images[:3]])
    small = random_images(1, (10, 16, 3), seed=4)[0]
    write_records(tmp_path / "src" / "b.tfrecord",
                  [example(image=png(im), label=1) for im in (images[3], images[4], small)])
    return str(tmp_path / "src")


def _raw_with_a_taller_image(tmp_path) -> str:
    images = random_images(3, (4, 4), seed=5)
    records = [example(pixels=im.tobytes(), height=4, width=4, label=0) for im in images]
    records.insert(1, example(pixels=bytes(20), height=5, width=4, label=1))
    return write_records(tmp_path / "raw.tfrecord", records)


@pytest.mark.parametrize("make_source, expected", [
    (_png_files_with_a_smaller_image, ["b.tfrecord", "record 2", "[10, 16, 3]", "[12, 16, 3]",
                                       "resize the images to one size"]),
    (_raw_with_a_taller_image, ["raw.tfrecord", "record 1", "[5, 4, 1]", "[4, 4, 1]", "resize"]),
])
def test_images_of_different_sizes_are_rejected_before_writing(make_source, expected, tmp_path):
    with pytest.raises(InvalidInputError) as err:
        shard(make_source(tmp_path), tmp_path / "out")
    for text in expected:
        assert text in str(err.value)
    assert_nothing_written(tmp_path)


def test_an_undecodable_image_is_named(tmp_path):
    good = png(random_images(1, (6, 6, 1))[0])
    path = write_records(tmp_path / "a.tfrecord", [
        example(image=good, label=0), example(image=good, label=1),
        example(image=good[:20], label=0)])
    with pytest.raises(InvalidInputError, match=r"record 2 of '.*a\.tfrecord'.*not a decodable"):
        shard(path, tmp_path / "out")
    assert_nothing_written(tmp_path)


def test_non_image_bytes_without_a_shape_say_what_is_valid(tmp_path):
    path = write_records(tmp_path / "a.tfrecord", [example(name=b"hello", label=0)])
    with pytest.raises(InvalidInputError) as err:
        shard(path, tmp_path / "out")
    for text in ("['name']", "PNG", "JPEG", "image_shape", "height/width"):
        assert text in str(err.value)
    assert_nothing_written(tmp_path)


def test_two_bytes_features_need_image_feature(tmp_path):
    image = png(random_images(1, (6, 6, 1))[0])
    path = write_records(tmp_path / "a.tfrecord", [example(img=image, caption=b"a digit", label=0)])
    with pytest.raises(InvalidInputError, match=r"\['caption', 'img'\].*image_feature"):
        shard(path, tmp_path / "out")
    assert_nothing_written(tmp_path)


def test_image_feature_picks_one_of_two_bytes_features(tmp_path):
    images = random_images(4, (6, 7, 1), seed=6)
    path = write_records(tmp_path / "a.tfrecord", [
        example(img=png(im), caption=b"a digit", label=i) for i, im in enumerate(images)])
    source = open_tfrecord_source([path], ReaderOptions(image_feature="img"))
    assert source.feature.shape == (6, 7, 1) and source.feature.encoding == "png"
    (batch,) = list(source.batches())
    np.testing.assert_array_equal(batch.inputs, images)
    np.testing.assert_array_equal(batch.labels, np.arange(4))
    with pytest.raises(InvalidInputError, match="image_feature 'pixels'.*'caption', 'img'"):
        open_tfrecord_source([path], ReaderOptions(image_feature="pixels"))


# ----------------------------------------------------------------------------- models


def _meta(shape, key=ds.IMAGE_KEY) -> ds.DatasetMetadata:
    return ds.DatasetMetadata(
        source_uri="x", source_format="tfrecord", feature=ds.FeatureSpec(key, "uint8", shape),
        num_classes=5, preprocessing=ds.Preprocessing("scale", 1 / 255, 0.0), compression=None,
        seed=0, eval_fraction=0.2, splits={})


@pytest.mark.parametrize("shape", [(8, 8, 1), (28, 28), (28, 28, 1), (32, 32, 3), (64, 48, 3)])
def test_image_cnn_sizes_itself_to_its_input(shape):
    model = models.build_model("image_cnn", _meta(shape))
    assert model.name == "image_cnn"
    assert model(np.zeros((2, *shape), np.float32)).shape == (2, 5)


@pytest.mark.parametrize("name", ["mnist_mlp", "mnist_cnn"])
@pytest.mark.parametrize("shape", [(28, 28), (28, 28, 1)])
def test_mnist_models_take_one_channel_or_none(name, shape):
    assert models.build_model(name, _meta(shape))(np.zeros((2, *shape), np.float32)).shape == (2, 5)


def test_models_name_what_would_fit():
    with pytest.raises(InvalidInputError, match=r"'mnist_cnn' needs a 28x28 'image'.*"
                                                r"\[32, 32, 3\].*'image_cnn'"):
        models.check_compatible("mnist_cnn", _meta((32, 32, 3)))
    with pytest.raises(InvalidInputError, match=r"'image_cnn' needs an 'image' feature.*"
                                                r"'features' of shape \[13\].*user model"):
        models.check_compatible("image_cnn", _meta((13,), key=ds.FEATURES_KEY))
    models.check_compatible("image_cnn", _meta((5, 7)))


# ----------------------------------------------------------------------------- the images sample


@pytest.fixture(scope="module")
def images_sample(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("images"))
    return out, write_images_sample(out)


def test_images_sample_writes_train_and_test_once(images_sample):
    out, written = images_sample
    assert written["dir"] == out and written["train"] + written["test"] == 1797
    assert written["test"] == round(1797 * 0.2)
    paths = [os.path.join(out, name) for name in (IMAGES_TRAIN, IMAGES_TEST)]
    for path in paths:
        os.utime(path, (1_000_000, 1_000_000))
    assert write_images_sample(out) == written
    assert [os.stat(path).st_mtime for path in paths] == [1_000_000, 1_000_000]


def test_images_sample_shards_into_28x28x1_png_digits(images_sample, tmp_path):
    out, written = images_sample
    meta = runtime.shard(out, str(tmp_path / "ds"), num_shards=2, log=quiet)
    assert meta.source_format == "tfrecord" and meta.num_classes == 10
    assert meta.feature == ds.FeatureSpec(key=ds.IMAGE_KEY, dtype="uint8", shape=(28, 28, 1),
                                          encoding="png")
    assert meta.splits["eval"].num_examples == written["test"]
    images, labels = digits_as_mnist()
    assert stored_examples(str(tmp_path / "ds"), meta) == sorted(
        (im.tobytes(), int(y)) for im, y in zip(images, labels))
