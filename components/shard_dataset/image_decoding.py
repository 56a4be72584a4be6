"""Images in TFRecord sources: which bytes feature, encoded or raw, and which shape.

A bytes feature holds images when its first value starts with a PNG, JPEG,
GIF or BMP signature (encoded images, decoded while reading so that the
dataset stores raw pixels), or when the images' shape is declared: by
`image_shape`, or by int64 `height`, `width` and optionally `channels` (or
`depth`) features of every example (also `image/height`, `image/width`,
`image/channels`). The first image fixes the shape and every other image
must have it; a record that breaks this is reported, with its file and index,
while streaming, so before any shard is written.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.shard_dataset.source import BATCH_SIZE, ExampleBatch, ReaderOptions

#: File signatures of the formats `tf.io.decode_image` reads.
SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "png"), (b"\xff\xd8\xff", "jpeg"),
              (b"GIF87a", "gif"), (b"GIF89a", "gif"), (b"BM", "bmp"))
#: int64 features that give raw images' height, width and (optionally) channels.
SHAPE_FEATURES = (("height", "width", ("channels", "depth")),
                  ("image/height", "image/width", ("image/channels", "image/depth")))
RESIZE_HINT = "every image must have the same size: resize the images to one size before sharding"


@dataclasses.dataclass(frozen=True)
class ImageLayout:
    """How a source's examples hold their images.

    Attributes:
      key: The bytes feature holding one image per example.
      shape: Every image's shape, as stored in the dataset (the first image's).
      encoding: `png`, `jpeg`, `gif` or `bmp` (the first image's format;
        decoded while reading), or None for raw uint8 pixels.
      shape_keys: For raw pixels whose shape the examples carry: the int64
        height, width (and channels) features, checked in every record.
    """

    key: str
    shape: Tuple[int, ...]
    encoding: Optional[str] = None
    shape_keys: Tuple[str, ...] = ()


def image_format(value: bytes) -> Optional[str]:
    """Returns `png`, `jpeg`, `gif` or `bmp` if `value` starts with that signature, else None."""
    for signature, name in SIGNATURES:
        if value.startswith(signature):
            return name
    return None


def image_key(path: str, byte_keys: Sequence[str], options: ReaderOptions) -> Optional[str]:
    """The bytes feature holding the images: `options.image_feature` or the only one.

    Args:
      path: The file the keys come from (for messages).
      byte_keys: The examples' bytes features.
      options: The reader options.

    Returns:
      The feature's name, or None when the examples have no bytes feature.

    Raises:
      InvalidInputError: If `image_feature` is not a bytes feature, or there
        are several bytes features and no `image_feature`.
    """
    if options.image_feature is not None:
        require(options.image_feature in byte_keys,
                f"image_feature {options.image_feature!r} is not a bytes feature of the "
                f"examples in {path!r}; their bytes features are {list(byte_keys) or 'none'}")
        return options.image_feature
    if not byte_keys:
        return None
    require(len(byte_keys) == 1,
            f"the examples in {path!r} have several bytes features {list(byte_keys)}; "
            "pass image_feature to name the one holding the images")
    return byte_keys[0]


def _single_int(features, key: str) -> Optional[int]:
    if key not in features or features[key].WhichOneof("kind") != "int64_list":
        return None
    values = features[key].int64_list.value
    return int(values[0]) if len(values) == 1 else None


def declared_shape(path: str, features, options: ReaderOptions
                   ) -> Tuple[Optional[Tuple[int, ...]], Tuple[str, ...]]:
    """The raw images' shape from `image_shape` or from the first example's shape features.

    Returns:
      `(shape, shape_keys)`: `image_shape` and no keys; or `(H, W, C)` (C = 1
      without a channels feature) and the features it came from; or `(None, ())`.
    """
    if options.image_shape is not None:
        return tuple(int(d) for d in options.image_shape), ()
    for height, width, channel_keys in SHAPE_FEATURES:
        if _single_int(features, height) is None or _single_int(features, width) is None:
            continue
        keys = (height, width) + tuple(k for k in channel_keys
                                       if _single_int(features, k) is not None)[:1]
        shape = tuple(_single_int(features, k) for k in keys) + ((1,) if len(keys) == 2 else ())
        require(all(d > 0 for d in shape),
                f"the first example in {path!r} has image shape {list(shape)} "
                f"(features {list(keys)}); every dimension must be positive")
        return shape, keys
    return None, ()


def decode_image_bytes(value: bytes, failure: Callable[[str], str]) -> np.ndarray:
    """Decodes one encoded (PNG, JPEG, GIF, BMP) image to uint8 `[H, W, C]`.

    Args:
      value: The encoded image.
      failure: The error message, given TensorFlow's reason (`error_detail`).

    Raises:
      InvalidInputError: With `failure`'s message if the image does not decode.
    """
    import tensorflow as tf

    try:
        return tf.io.decode_image(value, expand_animations=False).numpy()
    except (tf.errors.OpError, ValueError) as e:
        raise InvalidInputError(failure(error_detail(e))) from e


def decode_one(value: bytes, path: str, index: int, key: str) -> np.ndarray:
    """Decodes one encoded image to uint8 `[H, W, C]`.

    Raises:
      InvalidInputError: Naming the file and record index if it does not decode.
    """
    return decode_image_bytes(value, lambda detail: (
        f"record {index} of {path!r}: its {key!r} value is not a decodable PNG, JPEG, GIF "
        f"or BMP image ({detail}); fix or drop that record"))


def error_detail(error: Exception) -> str:
    """The first line of a TensorFlow error's message, without TensorFlow's op names."""
    import tensorflow as tf

    detail = error.message if isinstance(error, tf.errors.OpError) else str(error)
    detail = re.sub(r"\{\{.*?\}\}|\[Op:\w+\]( name: \S*)?", "", detail).strip()
    return detail.splitlines()[0] if detail else type(error).__name__


def infer_image_layout(path: str, features, key: str, options: ReaderOptions) -> ImageLayout:
    """Tells from the first example whether `key` holds encoded or raw images, and their shape.

    Args:
      path: The file of the first example.
      features: The first example's `features.feature` map.
      key: The bytes feature holding the images.
      options: The reader options (`image_shape`).

    Raises:
      InvalidInputError: If the value is neither an encoded image nor raw
        pixels of a declared shape, or does not match `image_shape`.
    """
    values = features[key].bytes_list.value
    require(len(values) == 1, f"bytes feature {key!r} in {path!r} holds {len(values)} values; "
                              "an image feature holds one image per example")
    shape, shape_keys = declared_shape(path, features, options)
    encoding = image_format(values[0])
    if encoding is not None and (shape is None or len(values[0]) != int(np.prod(shape))):
        decoded = tuple(int(d) for d in decode_one(values[0], path, 0, key).shape)
        if options.image_shape is not None:
            fits = (decoded, decoded[:2] if decoded[2] == 1 else None)
            require(tuple(options.image_shape) in fits,
                    f"image_shape {list(options.image_shape)} does not match the first image in "
                    f"{path!r}, a {encoding} of shape {list(decoded)}; leave image_shape unset "
                    "for encoded images (their shape comes from the data)")
        return ImageLayout(key=key, shape=decoded, encoding=encoding)
    require(shape is not None,
            f"the bytes feature {[key]} in {path!r} holds neither encoded images (its first "
            "value does not start with a PNG, JPEG, GIF or BMP signature) nor raw pixels of a "
            "known shape; valid are: encoded PNG/JPEG/GIF/BMP images, raw uint8 pixels with "
            "image_shape set, or raw pixels with int64 height/width (and channels) features "
            "in every example; drop the feature if it holds no images")
    return ImageLayout(key=key, shape=shape, shape_keys=shape_keys)


def check_image_shapes(shapes: np.ndarray, expected: Tuple[int, ...],
                       image: Callable[[int], str]) -> None:
    """Raises `InvalidInputError` for the first row of `shapes` `[B, rank]` not equal to `expected`.

    Args:
      shapes: Each image's shape.
      expected: The first image's shape.
      image: Names the `i`-th image of the block with its verb, e.g. `'a/1.png' is`.
    """
    bad = np.flatnonzero((shapes != np.asarray(expected)).any(axis=1))
    if bad.size:
        i = int(bad[0])
        raise InvalidInputError(
            f"{image(i)} an image of shape {[int(d) for d in shapes[i]]}, but the first image "
            f"has shape {list(expected)}; {RESIZE_HINT}")


def check_shapes(shapes: np.ndarray, expected: Tuple[int, ...], path: str, start: int) -> None:
    """Raises `InvalidInputError` for the first record whose image shape is not `expected`.

    Args:
      shapes: Each record's image shape.
      expected: The first image's shape.
      path: The records' file.
      start: Index in `path` of the first record of the block.
    """
    check_image_shapes(shapes, expected, lambda i: f"record {start + i} of {path!r} holds")


def raw_images(parsed, layout: ImageLayout, path: str, start: int) -> np.ndarray:
    """Raw pixels of a block of parsed records as uint8 `[B, *layout.shape]`.

    Args:
      parsed: `tf.io.parse_example` output as numpy (the image bytes and any shape features).
      layout: A raw (`encoding` None) layout.
      path: The records' file.
      start: Index in `path` of the block's first record.

    Raises:
      InvalidInputError: If a record's shape features or byte count do not fit `layout.shape`.
    """
    values = parsed[layout.key]
    if layout.shape_keys:
        shapes = np.stack([parsed[k] for k in layout.shape_keys], axis=1).reshape(len(values), -1)
        if len(layout.shape_keys) == 2:
            shapes = np.concatenate([shapes, np.ones((len(values), 1), shapes.dtype)], axis=1)
        check_shapes(shapes, layout.shape, path, start)
    size = int(np.prod(layout.shape))
    bad = [i for i, v in enumerate(values) if len(v) != size]
    if bad:
        declared = ("image_shape" if not layout.shape_keys
                    else f"the shape from its {'/'.join(layout.shape_keys)} features")
        raise InvalidInputError(
            f"record {start + bad[0]} of {path!r}: its {layout.key!r} value has "
            f"{len(values[bad[0]])} bytes; {declared} {list(layout.shape)} needs {size}")
    return np.frombuffer(b"".join(values), np.uint8).reshape((len(values), *layout.shape))


def encoded_dataset(path: str, compression: str, layout: ImageLayout, label_key: str):
    """A `tf.data.Dataset` of `(images, labels, shapes)` blocks of `BATCH_SIZE` decoded records.

    Images are decoded in parallel, in order; one whose shape is not
    `layout.shape` comes as zeros with its true shape in `shapes` (see
    `encoded_batch`). An undecodable value fails the block (see `find_undecodable`).
    """
    import tensorflow as tf

    spec = {layout.key: tf.io.FixedLenFeature([], tf.string),
            label_key: tf.io.FixedLenFeature([], tf.int64)}
    expected = tf.constant(layout.shape, tf.int32)

    def decode(record):
        parsed = tf.io.parse_single_example(record, spec)
        image = tf.io.decode_image(parsed[layout.key], expand_animations=False)
        shape = tf.shape(image, out_type=tf.int32)
        fits = tf.reduce_all(tf.equal(shape, expected))
        image = tf.cond(fits, lambda: tf.reshape(image, layout.shape),
                        lambda: tf.zeros(layout.shape, tf.uint8))
        return image, parsed[label_key], shape

    return (tf.data.TFRecordDataset(path, compression)
            .map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            .batch(BATCH_SIZE).prefetch(1))


def encoded_batch(block, layout: ImageLayout, path: str, start: int) -> ExampleBatch:
    """An `ExampleBatch` from one `encoded_dataset` block, after checking every image's shape."""
    images, labels, shapes = block
    check_shapes(shapes, layout.shape, path, start)
    return ExampleBatch(inputs=images, labels=labels.astype(np.int64), origin=path)


def find_undecodable(path: str, compression: str, layout: ImageLayout, start: int) -> None:
    """Decodes the block of records from `start` one by one to name the one that fails.

    Raises:
      InvalidInputError: For the first undecodable image (returns if the
        block's failure was something else, e.g. a corrupt record).
    """
    import tensorflow as tf

    spec = {layout.key: tf.io.FixedLenFeature([], tf.string)}
    records = tf.data.TFRecordDataset(path, compression).skip(start).take(BATCH_SIZE)
    try:
        for index, record in enumerate(records, start):
            value = tf.io.parse_single_example(record, spec)[layout.key].numpy()
            decode_one(value, path, index, layout.key)
    except tf.errors.OpError:
        return
