"""The eval split as a replica reads it: for the side-car evaluator and the per-epoch validation.

Both score the whole `eval` split of the dataset, parsed and preprocessed as
in training, in batches of `EVAL_BATCH` (the batch size `evaluate_model`
scores with by default).
"""

from __future__ import annotations

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import tensorflow as tf

from kfdist.components.common import dataset_spec, tf_features
from kfdist.components.common.eval_predictions import EVAL_BATCH, EVAL_SPLIT


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
    return tf_features.split_batches(meta, dataset_dir, EVAL_SPLIT, EVAL_BATCH).cache()


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
