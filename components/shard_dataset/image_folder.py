"""Folders of image files, one sub-folder per class (the layout of Keras's
`image_dataset_from_directory`).

    photos/cats/0001.jpg          photos/train/cats/0001.jpg
    photos/dogs/0002.png    or    photos/test/dogs/0002.png

Each sub-folder of the source is a class, named by the folder; the class ids
follow the names' alphabetical order, as Keras orders them, and the names
become the dataset's `class_names` (as a table's string labels do). Images may
sit deeper inside a class folder. When every top-level folder names a split
(`train*`, `eval*`/`test*`/`valid*`), the classes are the folders below them.

Files are PNG, JPEG, GIF or BMP, told by their names and checked by their
first bytes when the source is opened; they are decoded with
`tf.io.decode_image` while reading. As for encoded images in TFRecords, the
first image fixes the shape stored in the dataset and every other must have
it; a file that breaks this is named before any shard is written.
"""

from __future__ import annotations

import itertools
import os
from typing import Dict, Iterator, List, Sequence, Tuple

import numpy as np

from kfdist.components.common.dataset_spec import IMAGE_KEY, FeatureSpec
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.shard_dataset.image_decoding import (
    SIGNATURES, check_image_shapes, decode_image_bytes, error_detail, image_format)
from kfdist.components.shard_dataset.source import (
    BATCH_SIZE, MAX_NUM_CLASSES, ExampleBatch, ReaderOptions, Source)
from kfdist.components.shard_dataset.splits import split_named_by, split_of_file

IMAGE_FOLDER = "image_folder"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp")
LAYOUT = "a folder with one sub-folder of PNG/JPEG/GIF/BMP files per class"
#: Bytes read from each file to check its signature.
_SIGNATURE_BYTES = max(len(signature) for signature, _ in SIGNATURES)


def is_image_file(path: str) -> bool:
    """Returns whether `path` is named like an image file (`.png`, `.jpg`, ...)."""
    return path.lower().endswith(IMAGE_SUFFIXES)


def _parts(path: str, root: str) -> List[str]:
    return os.path.relpath(path, root).split(os.sep)


def class_folders(files: Sequence[str], root: str) -> Dict[str, str]:
    """The class of every image file: the folder below `root` (or below its split folder).

    Raises:
      InvalidInputError: If a file lies directly in `root` (or in a split folder).
    """
    by_split = all(len(_parts(f, root)) >= 3 and split_named_by(_parts(f, root)[0])
                   for f in files)
    depth = 1 if by_split else 0
    classes = {}
    for path in files:
        parts = _parts(path, root)
        require(len(parts) >= depth + 2,
                f"image {'/'.join(parts)!r} is not in a class folder; expected {LAYOUT} "
                "(the folder's name is the class), e.g. cats/0001.jpg and dogs/0002.png")
        classes[path] = parts[depth]
    return classes


def check_signatures(files: Sequence[str], root: str) -> str:
    """Checks that every file starts like a PNG, JPEG, GIF or BMP image.

    Returns:
      The first file's format (`png`, `jpeg`, ...): what the serving signature takes.

    Raises:
      InvalidInputError: Naming the first file that is not an image.
    """
    formats = []
    for path in files:
        with open(path, "rb") as f:
            found = image_format(f.read(_SIGNATURE_BYTES))
        require(found is not None,
                f"{os.path.relpath(path, root)!r} is named like an image but is not a PNG, "
                "JPEG, GIF or BMP image (its first bytes are no image signature); "
                "replace it with the image or remove it")
        formats.append(found)
    return formats[0]


def _units(files: Sequence[str], root: str) -> List[Tuple[str, ...]]:
    """The files grouped by folder (and split named in their path), each group sorted:
    the units read in parallel, every one of a single class and split."""
    def key(path: str) -> Tuple[str, str]:
        return os.path.dirname(path), split_of_file(path, root) or ""

    ordered = sorted(files, key=lambda f: (key(f), f))
    return [tuple(group) for _, group in itertools.groupby(ordered, key=key)]


def _dataset(files: Sequence[str], shape: Tuple[int, ...]):
    """Blocks of `(images, shapes)` decoded in parallel, in order; an image not of `shape`
    comes as zeros with its own shape in `shapes` (checked by `_read_unit`)."""
    import tensorflow as tf

    expected = tf.constant(shape, tf.int32)

    def decode(path):
        image = tf.io.decode_image(tf.io.read_file(path), expand_animations=False)
        found = tf.shape(image, out_type=tf.int32)
        fits = tf.reduce_all(tf.equal(found, expected))
        image = tf.cond(fits, lambda: tf.reshape(image, shape), lambda: tf.zeros(shape, tf.uint8))
        return image, found

    return (tf.data.Dataset.from_tensor_slices(list(files))
            .map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            .batch(BATCH_SIZE).prefetch(1))


def decode_file(path: str, root: str) -> np.ndarray:
    """Decodes one image file to uint8 `[H, W, C]`.

    Raises:
      InvalidInputError: Naming the file (below `root`) if it does not decode.
    """
    with open(path, "rb") as f:
        value = f.read()
    return decode_image_bytes(value, lambda detail: (
        f"{os.path.relpath(path, root)!r} is not a decodable PNG, JPEG, GIF or BMP image "
        f"({detail}); replace it or remove it"))


def _read_unit(files: Sequence[str], label: int, shape: Tuple[int, ...],
               root: str) -> Iterator[ExampleBatch]:
    import tensorflow as tf

    iterator = _dataset(files, shape).as_numpy_iterator()
    for start in itertools.count(0, BATCH_SIZE):
        block = files[start:start + BATCH_SIZE]
        try:
            images, shapes = next(iterator)
        except StopIteration:
            return
        except tf.errors.OpError as e:
            for path in block:  # names the file that fails
                decode_file(path, root)
            raise InvalidInputError(f"cannot read the images of "
                                    f"{os.path.relpath(os.path.dirname(block[0]), root)!r}: "
                                    f"{error_detail(e)}") from e
        check_image_shapes(shapes, shape, lambda i: f"{os.path.relpath(block[i], root)!r} is")
        yield ExampleBatch(inputs=images, labels=np.full(len(images), label, np.int64),
                           origin=files[0])


def open_image_folder_source(root: str, files: Sequence[str], options: ReaderOptions) -> Source:
    """Opens the image files below folder `root` as a source of one class per sub-folder.

    Args:
      root: The source folder.
      files: Its image files.
      options: The reader options (TFRecord settings are refused).

    Raises:
      InvalidInputError: If the layout, a file or the settings do not fit.
    """
    require(options.image_shape is None and options.image_feature is None,
            f"image_shape and image_feature apply to TFRecord sources; {root!r} is {LAYOUT}: "
            "leave them unset (the images' size comes from the files)")
    require(options.label_column == ReaderOptions.label_column,
            f"label_column {options.label_column!r} names a TFRecord feature or a CSV column; "
            f"{root!r} is {LAYOUT}, whose folders name the classes: leave label_column unset")
    classes = class_folders(files, root)
    names = tuple(sorted(set(classes.values())))
    require(len(names) <= MAX_NUM_CLASSES,
            f"{root!r} has {len(names)} class folders; at most {MAX_NUM_CLASSES} are taken")
    units = _units(files, root)
    encoding = check_signatures([unit[0] for unit in units], root)
    shape = tuple(int(d) for d in decode_file(units[0][0], root).shape)
    ids = {name: i for i, name in enumerate(names)}

    def read_unit(index: int) -> Iterator[ExampleBatch]:
        unit = units[index]
        check_signatures(unit, root)
        return _read_unit(unit, ids[classes[unit[0]]], shape, root)

    return Source(source_format=IMAGE_FOLDER, files=tuple(itertools.chain(*units)),
                  feature=FeatureSpec(key=IMAGE_KEY, dtype="uint8", shape=shape,
                                      encoding=encoding),
                  class_names=names, units=tuple(unit[0] for unit in units), read_unit=read_unit)
