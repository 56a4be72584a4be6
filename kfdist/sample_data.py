"""Sample data that ships inside a registry package: no download needed.

`mnist` turns scikit-learn's bundled handwritten digits (1,797 scans, 8×8,
16 grey levels, from the UCI optical digits set) into MNIST-format images:
each digit is resampled to 20×20 and centred in a 28×28 frame, as MNIST
digits are, then written as gzip-compressed IDX files, so every code path that
reads real MNIST reads these the same way.

`images` writes the same 28×28 digits as PNG-encoded images in TFRecord files
`train.tfrecord` and `test.tfrecord` (one `tf.train.Example` per digit: `image`
bytes and int64 `label`), the layout of an image dataset with its own split.

`tabular` is the Palmer penguins table as the `palmerpenguins` package ships
it: numbers, strings and missing values.
"""

from __future__ import annotations

import gzip
import io
import os
import struct
import tempfile
from typing import Tuple

import numpy as np

from kfdist.components.common.errors import require

IDX_IMAGES_MAGIC = 2051
IDX_LABELS_MAGIC = 2049
TRAIN_IMAGES = "train-images-idx3-ubyte.gz"
TRAIN_LABELS = "train-labels-idx1-ubyte.gz"
TEST_IMAGES = "t10k-images-idx3-ubyte.gz"
TEST_LABELS = "t10k-labels-idx1-ubyte.gz"
IMAGES_TRAIN = "train.tfrecord"
IMAGES_TEST = "test.tfrecord"


def digits_as_mnist() -> Tuple[np.ndarray, np.ndarray]:
    """Returns scikit-learn's digits as MNIST-like arrays.

    Returns:
      `(images, labels)`: uint8 `[N, 28, 28]` (0 = background, 255 = ink) and
      uint8 `[N]` class ids 0..9.
    """
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = digits.images.astype(np.float32) / 16.0           # [N, 8, 8] in [0, 1]
    big = zoom(small, (1, 20 / 8, 20 / 8), order=1)           # bilinear to [N, 20, 20]
    big = np.clip(big, 0.0, 1.0)
    images = np.zeros((len(big), 28, 28), dtype=np.uint8)
    images[:, 4:24, 4:24] = np.round(big * 255).astype(np.uint8)
    return images, digits.target.astype(np.uint8)


def write_idx_images(path: str, images: np.ndarray) -> None:
    """Writes uint8 images `[N, rows, cols]` as a gzip IDX3 file (MNIST format)."""
    require(images.dtype == np.uint8 and images.ndim == 3,
            f"images must be uint8 [N, rows, cols], got {images.dtype} {images.shape}")
    _write_gzip(path, struct.pack(">IIII", IDX_IMAGES_MAGIC, *images.shape)
                + np.ascontiguousarray(images).tobytes())


def write_idx_labels(path: str, labels: np.ndarray) -> None:
    """Writes uint8 labels `[N]` as a gzip IDX1 file (MNIST format)."""
    require(labels.dtype == np.uint8 and labels.ndim == 1,
            f"labels must be uint8 [N], got {labels.dtype} {labels.shape}")
    _write_gzip(path, struct.pack(">II", IDX_LABELS_MAGIC, len(labels)) + labels.tobytes())


def _write_gzip(path: str, payload: bytes) -> None:
    """Writes `payload` gzipped (no timestamp), leaving a file with the same bytes untouched.

    An untouched file keeps its modification time, so a later `kfdist run` on
    the same sample sees unchanged data and reuses its cached shard step.
    """
    _write_if_changed(path, gzip.compress(payload, mtime=0))


def _write_if_changed(path: str, data: bytes) -> None:
    """Writes `data` to `path` unless the file already holds exactly these bytes."""
    if os.path.isfile(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return
    with open(path, "wb") as f:
        f.write(data)


def _shuffled_digits(test_fraction: float, seed: int) -> Tuple[np.ndarray, np.ndarray, int]:
    """The digits in a seeded order, and how many of them (the first) are the test split."""
    require(0.0 < test_fraction < 1.0,
            f"test_fraction must be in (0, 1), got {test_fraction!r}")
    images, labels = digits_as_mnist()
    order = np.random.default_rng(seed).permutation(len(labels))
    return images[order], labels[order], int(round(len(labels) * test_fraction))


def write_mnist_sample(out_dir: str, test_fraction: float = 0.2, seed: int = 0) -> dict:
    """Writes the sample as the four MNIST files into `out_dir`.

    The digits are split into `train-*` and `t10k-*` files like MNIST (the
    shard step may re-split them; both files are read).

    Args:
      out_dir: Directory to create or fill; existing MNIST files are replaced
        (files already holding the same bytes are left as they are).
      test_fraction: Share of the digits put into the `t10k-*` files, in (0, 1).
      seed: Seed of the shuffle before splitting.

    Returns:
      `{"train": n_train, "test": n_test, "dir": out_dir}`.
    """
    images, labels, n_test = _shuffled_digits(test_fraction, seed)
    os.makedirs(out_dir, exist_ok=True)
    write_idx_images(os.path.join(out_dir, TRAIN_IMAGES), images[n_test:])
    write_idx_labels(os.path.join(out_dir, TRAIN_LABELS), labels[n_test:])
    write_idx_images(os.path.join(out_dir, TEST_IMAGES), images[:n_test])
    write_idx_labels(os.path.join(out_dir, TEST_LABELS), labels[:n_test])
    return {"train": len(labels) - n_test, "test": n_test, "dir": out_dir}


def encode_png(image: np.ndarray) -> bytes:
    """PNG bytes of a uint8 `[rows, cols]` greyscale image (deterministic: no timestamps)."""
    from PIL import Image

    buffer = io.BytesIO()
    require(image.dtype == np.uint8 and image.ndim == 2,
            f"image must be uint8 [rows, cols], got {image.dtype} {image.shape}")
    Image.fromarray(image).save(buffer, format="PNG")  # uint8 2-D: greyscale ("L")
    return buffer.getvalue()


def write_png_tfrecord(path: str, images: np.ndarray, labels: np.ndarray) -> None:
    """Writes `tf.train.Example`s of PNG `image` bytes and int64 `label` to a TFRecord file.

    The records are serialized deterministically, and a file already holding
    the same bytes is left untouched (it keeps its modification time).
    """
    import tensorflow as tf

    with tempfile.TemporaryDirectory(prefix="kfdist-sample-") as tmp:
        staged = os.path.join(tmp, os.path.basename(path))
        with tf.io.TFRecordWriter(staged) as writer:
            for image, label in zip(images, labels.tolist()):
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[encode_png(image)])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                })).SerializeToString(deterministic=True))
        with open(staged, "rb") as f:
            _write_if_changed(path, f.read())


def write_images_sample(out_dir: str, test_fraction: float = 0.2, seed: int = 0) -> dict:
    """Writes the digits as PNG images in `train.tfrecord` and `test.tfrecord` under `out_dir`.

    Args:
      out_dir: Directory to create or fill; files already holding the same
        bytes are left as they are.
      test_fraction: Share of the digits put into `test.tfrecord`, in (0, 1).
      seed: Seed of the shuffle before splitting.

    Returns:
      `{"train": n_train, "test": n_test, "dir": out_dir}`.
    """
    images, labels, n_test = _shuffled_digits(test_fraction, seed)
    os.makedirs(out_dir, exist_ok=True)
    write_png_tfrecord(os.path.join(out_dir, IMAGES_TRAIN), images[n_test:], labels[n_test:])
    write_png_tfrecord(os.path.join(out_dir, IMAGES_TEST), images[:n_test], labels[:n_test])
    return {"train": len(labels) - n_test, "test": n_test, "dir": out_dir}


def penguins_csv_path() -> str:
    """The Palmer penguins table the `palmerpenguins` package ships (read without importing
    it: its `__init__` imports pandas)."""
    import importlib.util

    spec = importlib.util.find_spec("palmerpenguins")
    require(spec is not None and spec.origin is not None,
            "the palmerpenguins package is not installed; pip install palmerpenguins")
    return os.path.join(os.path.dirname(spec.origin), "data", "penguins.csv")


def write_tabular_sample(out_dir: str) -> dict:
    """Writes the Palmer penguins table (344 penguins, 3 species) as `penguins.csv` in `out_dir`.

    Columns: `species` (the label), `island` and `sex` (strings), four body
    measurements and `year` (numbers); `NA` marks a missing value. The file is
    the package's own, unchanged (a file already holding the same bytes is
    left as it is).

    Returns:
      `{"rows": n, "path": the CSV file, "label_column": "species", "dir": out_dir}`.
    """
    with open(penguins_csv_path(), "rb") as f:
        data = f.read()
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, SAMPLE_FILES["tabular"])
    _write_if_changed(path, data)
    rows = data.count(b"\n") - 1 + (0 if data.endswith(b"\n") else 1)
    return {"rows": rows, "path": path, "label_column": TABULAR_LABEL_COLUMN, "dir": out_dir}


TABULAR_LABEL_COLUMN = "species"
SAMPLES = {"mnist": write_mnist_sample, "images": write_images_sample,
           "tabular": write_tabular_sample}
#: What each sample is, as `kfdist sample-data --help` lists them (one entry per sample).
SAMPLE_DESCRIPTIONS = {"mnist": "handwritten digits as MNIST IDX files",
                       "images": "the digits as PNG images in train/test TFRecord files",
                       "tabular": "the Palmer penguins table as a CSV file, label: species"}
#: The samples that are tables: the CSV each is written from (checked before it is written).
SAMPLE_TABLES = {"tabular": penguins_csv_path}
#: The file a sample's source is, in the folder it is written to (the others: the folder).
SAMPLE_FILES = {"tabular": "penguins.csv"}
#: The label column of each sample that has one other than `label`.
SAMPLE_LABEL_COLUMNS = {"tabular": TABULAR_LABEL_COLUMN}
