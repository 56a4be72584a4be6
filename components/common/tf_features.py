"""TensorFlow functions derived from a `DatasetMetadata`: parse, preprocess, serve.

The same recorded preprocessing is applied in training, in evaluation and in
the exported serving signature, so a model never sees inputs prepared
differently from how it was trained.
"""

from __future__ import annotations

from typing import Callable, Tuple

import kfdist  # noqa: F401  (selects legacy Keras before TensorFlow loads)
import tensorflow as tf

from kfdist.components.common.dataset_spec import (
    IMAGE_KEY, LABEL_KEY, DatasetMetadata)


def parse_fn(meta: DatasetMetadata) -> Callable[[tf.Tensor], Tuple[tf.Tensor, tf.Tensor]]:
    """Returns a function mapping one serialized Example to `(raw_input, label)`.

    `raw_input` has `meta.feature.shape` and dtype uint8 (images) or float32.
    The function also accepts a 1-D batch of serialized examples (use it after
    `batch` for speed); the outputs then gain a leading batch dimension.
    """
    feature = meta.feature
    if feature.key == IMAGE_KEY:
        spec = {feature.key: tf.io.FixedLenFeature([], tf.string),
                LABEL_KEY: tf.io.FixedLenFeature([], tf.int64)}
    else:
        spec = {feature.key: tf.io.FixedLenFeature(list(feature.shape), tf.float32),
                LABEL_KEY: tf.io.FixedLenFeature([], tf.int64)}
    shape = list(feature.shape)

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        x = parsed[feature.key]
        if feature.key == IMAGE_KEY:
            x = tf.io.decode_raw(x, tf.uint8)
            lead = tf.shape(serialized)[:tf.rank(serialized)]
            x = tf.reshape(x, tf.concat([lead, shape], axis=0))
        return x, parsed[LABEL_KEY]

    return parse


def preprocess_fn(meta: DatasetMetadata) -> Callable[[tf.Tensor], tf.Tensor]:
    """Returns the recorded preprocessing: raw input (any batch shape) → float32."""
    pre = meta.preprocessing
    if pre.kind == "scale":
        scale = float(pre.scale if pre.scale is not None else 1.0)
        offset = float(pre.offset if pre.offset is not None else 0.0)
        return lambda x: tf.cast(x, tf.float32) * scale + offset
    if pre.kind == "standardize":
        mean = tf.constant(pre.mean, tf.float32)
        std = tf.constant(pre.std, tf.float32)
        return lambda x: (tf.cast(x, tf.float32) - mean) / std
    raise ValueError(f"unknown preprocessing kind {pre.kind!r}; expected 'scale' or 'standardize'")


def raw_input_signature(meta: DatasetMetadata) -> tf.TensorSpec:
    """The serving signature's input: a batch of raw inputs as stored in the dataset."""
    dtype = tf.uint8 if meta.feature.dtype == "uint8" else tf.float32
    return tf.TensorSpec([None, *meta.feature.shape], dtype, name=meta.feature.key)


def compression_type(meta: DatasetMetadata) -> str:
    """The `compression_type` argument for `tf.data.TFRecordDataset`."""
    return meta.compression or ""
