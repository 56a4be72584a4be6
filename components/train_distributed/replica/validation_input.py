"""The train split's records divided in `tf.data`: those trained on and the validation part.

The rule and the counts are `job.validation_part`'s; here each shard file is
read with its records numbered from the shard's position in the split, and
kept or dropped by the same float64 arithmetic, so the replicas' input and the
step's counts agree to the record.
"""

from __future__ import annotations

from typing import Optional, Sequence

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import tensorflow as tf

from kfdist.components.common import dataset_spec, tf_features
from kfdist.components.common.eval_predictions import EVAL_BATCH
from kfdist.components.train_distributed.job import validation_part

TRAIN_SPLIT = "train"


def in_validation_part(position: tf.Tensor, fraction: float) -> tf.Tensor:
    """`validation_part.in_validation_part` of a record's position, as a boolean tensor."""
    g = tf.cast(position, tf.float64)
    f = tf.constant(fraction, tf.float64)
    return tf.floor((g + 1.0) * f) > tf.floor(g * f)


def shard_records(path: tf.Tensor, offset: tf.Tensor, compression: str,
                  fraction: Optional[float], validation: bool) -> tf.data.Dataset:
    """One shard's serialized records: all of them without a `fraction`, else the validation
    part's (`validation`) or the others.

    Args:
      path: The shard file.
      offset: The position of its first record in the train split.
      compression: Its compression (`tf_features.compression_type`).
      fraction: The validation fraction; None: no validation part.
      validation: Keep the validation part's records rather than the others.
    """
    records = tf.data.TFRecordDataset(path, compression_type=compression)
    if fraction is None:
        return records
    return (records.enumerate(start=tf.cast(offset, tf.int64))
            .filter(lambda g, _: tf.equal(in_validation_part(g, fraction), validation))
            .map(lambda _, record: record))


def shard_table(paths: Sequence[str], offsets: Sequence[int]) -> tf.data.Dataset:
    """`(path, offset)` pairs of shard files, to read with `shard_records`."""
    return tf.data.Dataset.from_tensor_slices(
        (tf.constant(list(paths), tf.string), tf.constant(list(offsets), tf.int64)))


def validation_batches(meta: dataset_spec.DatasetMetadata, dataset_dir: str,
                       fraction: float) -> tf.data.Dataset:
    """One pass over the validation part, parsed and preprocessed, in batches of `EVAL_BATCH`.

    Cached in memory by the first pass that reads to the end.

    Args:
      meta: The dataset's metadata.
      dataset_dir: The dataset directory (local).
      fraction: The validation fraction.
    """
    parse = tf_features.parse_fn(meta)
    preprocess = tf_features.preprocess_fn(meta)
    compression = tf_features.compression_type(meta)
    sizes = [s.num_examples for s in meta.splits[TRAIN_SPLIT].shards]
    shards = shard_table(meta.shard_paths(dataset_dir, TRAIN_SPLIT),
                         validation_part.shard_offsets(sizes))

    def parse_batch(serialized):
        raw, label = parse(serialized)
        return preprocess(raw), label

    return (shards.flat_map(lambda path, offset: shard_records(path, offset, compression,
                                                               fraction, validation=True))
            .batch(EVAL_BATCH).map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE)
            .with_options(tf_features.pipeline_options()).cache())


def validation_examples(meta: dataset_spec.DatasetMetadata, fraction: Optional[float]) -> int:
    """Examples of the validation part (0 without one)."""
    sizes = [s.num_examples for s in meta.splits[TRAIN_SPLIT].shards]
    return validation_part.split_counts(sizes, fraction or 0.0, fraction is not None).validation
