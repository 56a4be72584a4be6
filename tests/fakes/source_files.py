"""Source files made on the fly for the shard tests: MNIST IDX pairs, and reading shards back."""

from __future__ import annotations

import gzip
import os
import struct

import numpy as np

from kfdist.components.common import dataset_spec, tf_features
from kfdist.sample_data import digits_as_mnist

IMAGES_MAGIC, LABELS_MAGIC = 2051, 2049


def write_idx(path: str, magic: int, dims, payload: bytes, compress: bool = True) -> None:
    """Writes an IDX file with any header (valid or not) and payload."""
    data = struct.pack(f">I{len(dims)}I", magic, *dims) + payload
    if compress:
        with gzip.open(path, "wb", compresslevel=1) as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)


def write_idx_pair(directory: str, images: np.ndarray, labels: np.ndarray,
                   prefix: str = "train") -> None:
    """Writes a valid gzip IDX images/labels pair."""
    os.makedirs(directory, exist_ok=True)
    write_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"), IMAGES_MAGIC,
              images.shape, images.tobytes())
    write_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"), LABELS_MAGIC,
              labels.shape, labels.astype(np.uint8).tobytes())


def synthetic_digits(n: int) -> tuple:
    """`n` distinct 28×28 digit images (sample digits tiled, index stamped in a corner)."""
    images, labels = digits_as_mnist()
    pick = np.arange(n) % len(labels)
    out = images[pick].copy()
    out[:, 0, :4] = np.frombuffer(np.arange(n, dtype="<u4").tobytes(), np.uint8).reshape(n, 4)
    return out, labels[pick].copy()


def read_split(root: str, meta: dataset_spec.DatasetMetadata, split: str) -> tuple:
    """`(inputs, labels)` of a split, parsed with the contract's reader."""
    import tensorflow as tf

    ds = tf.data.TFRecordDataset(meta.shard_paths(root, split),
                                 compression_type=tf_features.compression_type(meta))
    inputs, labels = next(iter(ds.batch(1_000_000).map(tf_features.parse_fn(meta))))
    return inputs.numpy(), labels.numpy()
