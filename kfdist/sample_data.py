"""Sample data that ships inside a registry package: no download needed.

`mnist` turns scikit-learn's bundled handwritten digits (1,797 scans, 8×8,
16 grey levels, from the UCI optical digits set) into MNIST-format images:
each digit is resampled to 20×20 and centred in a 28×28 frame, as MNIST
digits are, then written as gzip-compressed IDX files, so every code path that
reads real MNIST reads these the same way.
"""

from __future__ import annotations

import gzip
import os
import struct
from typing import Tuple

import numpy as np

from kfdist.components.common.errors import require

IDX_IMAGES_MAGIC = 2051
IDX_LABELS_MAGIC = 2049
TRAIN_IMAGES = "train-images-idx3-ubyte.gz"
TRAIN_LABELS = "train-labels-idx1-ubyte.gz"
TEST_IMAGES = "t10k-images-idx3-ubyte.gz"
TEST_LABELS = "t10k-labels-idx1-ubyte.gz"


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
    data = gzip.compress(payload, mtime=0)
    if os.path.isfile(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return
    with open(path, "wb") as f:
        f.write(data)


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
    require(0.0 < test_fraction < 1.0,
            f"test_fraction must be in (0, 1), got {test_fraction!r}")
    images, labels = digits_as_mnist()
    order = np.random.default_rng(seed).permutation(len(labels))
    images, labels = images[order], labels[order]
    n_test = int(round(len(labels) * test_fraction))
    os.makedirs(out_dir, exist_ok=True)
    write_idx_images(os.path.join(out_dir, TRAIN_IMAGES), images[n_test:])
    write_idx_labels(os.path.join(out_dir, TRAIN_LABELS), labels[n_test:])
    write_idx_images(os.path.join(out_dir, TEST_IMAGES), images[:n_test])
    write_idx_labels(os.path.join(out_dir, TEST_LABELS), labels[:n_test])
    return {"train": len(labels) - n_test, "test": n_test, "dir": out_dir}


SAMPLES = {"mnist": write_mnist_sample}
