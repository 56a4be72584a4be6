"""TensorFlow functions derived from a `DatasetMetadata`: parse, preprocess, serve.

The same recorded preprocessing is applied in training, in evaluation and in
the exported serving signature, so a model never sees inputs prepared
differently from how it was trained.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

import tensorflow as tf

from kfdist.components.common import serving_inputs
from kfdist.components.common.dataset_spec import (
    CATEGORICAL_KEY, FEATURES_KEY, IMAGE_KEY, LABEL_KEY, MISSING_VALUES, DatasetMetadata)


def parse_fn(meta: DatasetMetadata) -> Callable[[tf.Tensor], Tuple[object, tf.Tensor]]:
    """Returns a function mapping one serialized Example to `(raw_input, label)`.

    `raw_input` has `meta.feature.shape` and dtype uint8 (images) or float32;
    for a table with string columns it is a dict: `features` (float32) and
    `categorical` (string `[len(categorical_columns)]`). The function also
    accepts a 1-D batch of serialized examples (use it after `batch` for
    speed); the outputs then gain a leading batch dimension. The label is an int64 class
    id, or a regression's float32 number.
    """
    feature = meta.feature
    spec = {LABEL_KEY: tf.io.FixedLenFeature([], tf.float32 if meta.is_regression else tf.int64)}
    if feature.key == IMAGE_KEY:
        spec[feature.key] = tf.io.FixedLenFeature([], tf.string)
    else:
        spec[feature.key] = tf.io.FixedLenFeature(list(feature.shape), tf.float32)
    strings = len(feature.categorical_columns or ())
    if strings:
        spec[CATEGORICAL_KEY] = tf.io.FixedLenFeature([strings], tf.string)
    shape = list(feature.shape)

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        x = parsed[feature.key]
        if feature.key == IMAGE_KEY:
            x = tf.io.decode_raw(x, tf.uint8)
            lead = tf.shape(serialized)[:tf.rank(serialized)]
            x = tf.reshape(x, tf.concat([lead, shape], axis=0))
        if strings:
            x = {FEATURES_KEY: x, CATEGORICAL_KEY: parsed[CATEGORICAL_KEY]}
        return x, parsed[LABEL_KEY]

    return parse


def _one_hot_blocks(vocabularies) -> Callable[[tf.Tensor], tf.Tensor]:
    """String values `[..., K]` → per column, one-hot over its vocabulary plus an unknown slot;
    a missing value (`MISSING_VALUES`) sets no slot of its block."""
    tables = [tf.constant(list(v), tf.string, shape=[len(v)]) for v in vocabularies]
    missing_values = tf.constant(sorted(MISSING_VALUES), tf.string)

    def encode(values):
        blocks = []
        for column, vocabulary in enumerate(tables):
            value = values[..., column:column + 1]
            present = tf.logical_not(tf.reduce_any(tf.equal(value, missing_values), axis=-1,
                                                   keepdims=True))
            hits = tf.logical_and(tf.equal(value, vocabulary), present)
            unknown = tf.logical_and(
                tf.logical_not(tf.reduce_any(hits, axis=-1, keepdims=True)), present)
            blocks += [tf.cast(hits, tf.float32), tf.cast(unknown, tf.float32)]
        return tf.concat(blocks, axis=-1)

    return encode


def preprocess_fn(meta: DatasetMetadata) -> Callable[[object], tf.Tensor]:
    """Returns the recorded preprocessing: raw input (any batch shape) → float32.

    `scale`: `x * scale + offset`. `standardize`: `(x - mean) / std`, a missing
    value (NaN) becoming 0 (the train mean); then, for string columns, one
    one-hot block per column (`dataset_spec.model_input_shape`), all zeros for a
    missing value.
    """
    pre = meta.preprocessing
    if pre.kind == "scale":
        scale = float(pre.scale if pre.scale is not None else 1.0)
        offset = float(pre.offset if pre.offset is not None else 0.0)
        return lambda x: tf.cast(x, tf.float32) * scale + offset
    if pre.kind != "standardize":
        raise ValueError(f"unknown preprocessing kind {pre.kind!r}; expected 'scale' or 'standardize'")
    mean = tf.constant(pre.mean, tf.float32, shape=[len(pre.mean)])
    std = tf.constant(pre.std, tf.float32, shape=[len(pre.std)])

    def standardize(x):
        x = tf.cast(x, tf.float32)
        return tf.where(tf.math.is_nan(x), tf.zeros_like(x), (x - mean) / std)

    if not pre.vocabularies:
        return standardize
    one_hot = _one_hot_blocks(pre.vocabularies)
    return lambda raw: tf.concat([standardize(raw[FEATURES_KEY]),
                                  one_hot(raw[CATEGORICAL_KEY])], axis=-1)


def serving_signature(meta: DatasetMetadata) -> Dict[str, tf.TensorSpec]:
    """The serving signature's inputs (`serving_inputs`) as `TensorSpec`s by name."""
    dtypes = {"uint8": tf.uint8, "string": tf.string, "float32": tf.float32}
    return {i.name: tf.TensorSpec(list(i.shape), dtypes[i.dtype], name=i.name)
            for i in serving_inputs.serving_inputs(meta)}


def raw_from_serving(meta: DatasetMetadata) -> Callable[[Dict[str, tf.Tensor]], object]:
    """Returns `serving inputs → raw_input`, the same raw input `parse_fn` gives."""
    feature = meta.feature
    inputs = serving_inputs.serving_inputs(meta)
    if feature.key == IMAGE_KEY and feature.encoding:
        shape = list(feature.shape)
        channels = shape[2] if len(shape) == 3 else 1

        def decode(encoded):
            image = tf.io.decode_image(encoded, channels=channels, expand_animations=False)
            return tf.reshape(tf.ensure_shape(image, [shape[0], shape[1], channels]), shape)

        return lambda given: tf.map_fn(decode, given[inputs[0].name],
                                       fn_output_signature=tf.TensorSpec(shape, tf.uint8))
    if feature.key == IMAGE_KEY:
        return lambda given: given[inputs[0].name]
    numeric = [i.name for i in inputs if i.kind == serving_inputs.NUMERIC]
    strings = [i.name for i in inputs if i.kind == serving_inputs.CATEGORICAL]

    def table(given):
        rows = tf.shape(given[inputs[0].name])[0]
        x = (tf.stack([tf.cast(given[n], tf.float32) for n in numeric], axis=-1) if numeric
             else tf.zeros(tf.stack([rows, 0]), tf.float32))
        if not strings:
            return x
        return {FEATURES_KEY: x, CATEGORICAL_KEY: tf.stack([given[n] for n in strings], axis=-1)}

    return table


def compression_type(meta: DatasetMetadata) -> str:
    """The `compression_type` argument for `tf.data.TFRecordDataset`."""
    return meta.compression or ""


def split_batches(meta: DatasetMetadata, dataset_dir: str, split: str, batch_size: int,
                  preprocessing: Optional[DatasetMetadata] = None) -> tf.data.Dataset:
    """One pass over a split's shards, parsed and preprocessed, in batches, in shard order.

    Args:
      meta: The dataset's metadata (its shards and feature spec are read).
      dataset_dir: The dataset directory (local).
      split: The split to read.
      batch_size: Examples per batch (the last batch may hold fewer).
      preprocessing: Whose recorded preprocessing to apply (a model's training
        metadata); default: `meta`'s own.

    Returns:
      Batches `(preprocessed float32 inputs, int64 labels)`, with `pipeline_options`.
    """
    parse = parse_fn(meta)
    preprocess = preprocess_fn(preprocessing or meta)

    def parse_batch(serialized):
        raw, label = parse(serialized)
        return preprocess(raw), label

    files = meta.shard_paths(dataset_dir, split)
    return (tf.data.TFRecordDataset(files, compression_type=compression_type(meta))
            .batch(batch_size).map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE)
            .with_options(pipeline_options()))


def pipeline_options() -> tf.data.Options:
    """The `tf.data` options of kfdist's input pipelines: static tuning, no autotune thread.

    With autotuning on, TensorFlow 2.21 destroys an iterator only once its
    autotune thread wakes, and that thread sleeps up to 60 s between rounds:
    `fit` took 18-30 s to return after its last epoch of MNIST (the training
    iterator). kfdist's pipelines are parallel where it matters (reads,
    parsing) with `AUTOTUNE` values, which without the autotuner take
    TensorFlow's defaults. In paired 3-epoch MNIST runs the later epochs were
    as fast as with the autotuner, the first (which decodes and caches the
    split) 2-4 s slower.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return options
