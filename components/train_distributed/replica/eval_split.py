"""The eval split as a replica reads it: for the side-car evaluator and the per-epoch validation.

Both score the whole `eval` split of the dataset, parsed and preprocessed as
in training, in batches of `EVAL_BATCH` (the batch size `evaluate_model`
scores with by default).
"""

from __future__ import annotations

import kfdist  # noqa: F401  (selects legacy Keras before TensorFlow loads)
import tensorflow as tf

from kfdist.components.common import dataset_spec, tf_features

EVAL_SPLIT = "eval"
EVAL_BATCH = 256


def eval_batches(meta: dataset_spec.DatasetMetadata, dataset_dir: str) -> tf.data.Dataset:
    """One pass over the eval split, parsed and preprocessed, in batches of `EVAL_BATCH`.

    The batches are cached in memory by the first pass that reads to the end,
    so later passes do not read the files again.

    Args:
      meta: The dataset's metadata.
      dataset_dir: The dataset directory (local).

    Returns:
      Batches `(features, labels)` in shard order.
    """
    parse = tf_features.parse_fn(meta)
    preprocess = tf_features.preprocess_fn(meta)

    def parse_batch(serialized):
        raw, label = parse(serialized)
        return preprocess(raw), label

    files = meta.shard_paths(dataset_dir, EVAL_SPLIT)
    return (tf.data.TFRecordDataset(files, compression_type=tf_features.compression_type(meta))
            .batch(EVAL_BATCH).map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE)
            .cache().with_options(tf_features.pipeline_options()))


def eval_dataset(meta: dataset_spec.DatasetMetadata, dataset_dir: str) -> tf.data.Dataset:
    """The eval split, parsed and preprocessed, in batches of `EVAL_BATCH`, repeated.

    Evaluate `eval_steps(meta)` batches for one pass: a repeated dataset ends a
    pass without TensorFlow's end-of-sequence warnings.

    Args:
      meta: The dataset's metadata.
      dataset_dir: The dataset directory (local).

    Returns:
      The batches of `eval_batches`, repeated without end.
    """
    return eval_batches(meta, dataset_dir).repeat().prefetch(tf.data.AUTOTUNE)


def eval_steps(meta: dataset_spec.DatasetMetadata) -> int:
    """Batches in one pass over the eval split."""
    return -(-meta.splits[EVAL_SPLIT].num_examples // EVAL_BATCH)
