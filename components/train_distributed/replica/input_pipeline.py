"""The per-worker tf.data input pipeline for `distribute_datasets_from_function`.

Each worker reads its own part of the split, so the pipeline shards itself
and switches tf.data auto-sharding off:

* by file, when the split has at least as many shard files as there are
  input pipelines (workers): pipeline `i` of `n` reads files `i, i+n, ...`;
* by record otherwise: every pipeline reads all files and keeps every n-th record.

`sharding="file"` or `"record"` forces one mode; forcing `file` with fewer
files than pipelines is an error (some workers would get no data).

With early stopping, the validation part of the split (`job.validation_part`)
is left out first, file by file, before the sharding by record.

Then, when the pipeline's part fits in memory (`CACHE_LIMIT_BYTES`, counting
float32 inputs): read it once (files interleaved in parallel), parse and
preprocess it in one go, cache the tensors, and cut every epoch from a fresh
seeded permutation into batches with parallel gathers (a full shuffle, at
close to in-memory speed). Otherwise stream: interleave, shuffle through a bounded
buffer, repeat, batch, parse each batch at once, preprocess. Both prefetch.
The stream is infinite; `steps_per_epoch` bounds an epoch.

With an `InputWaitMeter`, a last stage after `prefetch` times how long each
take of a batch blocks, so the replica can measure how long its steps waited
for input (see `input_wait`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, List, Optional

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import tensorflow as tf

from kfdist.components.common import tf_features
from kfdist.components.common.dataset_spec import DatasetMetadata
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed.job import strategy_rules, validation_part
from kfdist.components.train_distributed.replica import validation_input

BY_FILE = "file"
BY_RECORD = "record"
#: Hold a pipeline's part decoded and preprocessed in memory when it fits in this budget.
CACHE_LIMIT_BYTES = 512 * 1024 * 1024
#: Preprocessed inputs are float32: up to 4 bytes in memory per stored byte (uint8 images).
DECODED_EXPANSION = 4
#: Assumed expansion of GZIP shards when estimating their in-memory size.
GZIP_EXPANSION = 4
SHUFFLE_BUFFER = 10_000
INTERLEAVE_CYCLE = 4


@dataclasses.dataclass(frozen=True)
class ShardPlan:
    """What one input pipeline reads.

    Attributes:
      mode: `file` (its own files) or `record` (every n-th record of all files).
      files: The TFRecord files it opens.
      num_pipelines: Input pipelines (workers) in the job.
      pipeline_id: This pipeline's index.
      estimated_bytes: Estimated in-memory size of the records it keeps.
      offsets: The position in the split of each file's first record (`validation_part`).
    """

    mode: str
    files: List[str]
    num_pipelines: int
    pipeline_id: int
    estimated_bytes: int
    offsets: List[int] = dataclasses.field(default_factory=list)

    def describe(self) -> str:
        """A one-line summary for the step log."""
        how = ("by file" if self.mode == BY_FILE
               else f"by record: fewer files ({len(self.files)}) than pipelines")
        return (f"input pipeline {self.pipeline_id} of {self.num_pipelines}: sharded {how}; "
                f"reading {len(self.files)} file(s)")


def plan_shards(meta: DatasetMetadata, dataset_dir: str, split: str,
                num_pipelines: int, pipeline_id: int, sharding: str = "auto") -> ShardPlan:
    """Decides how pipeline `pipeline_id` of `num_pipelines` shards `split`.

    Args:
      meta: The dataset's metadata.
      dataset_dir: Dataset directory.
      split: Split to read.
      num_pipelines: Input pipelines of the job.
      pipeline_id: This pipeline's index.
      sharding: `auto`, `file` or `record` (see the module docstring).

    Raises:
      InvalidInputError: If the split has no shards, or `file` sharding is
        forced with fewer files than pipelines.
    """
    paths = meta.shard_paths(dataset_dir, split)
    infos = meta.splits[split].shards
    if not paths:
        raise InvalidInputError(f"split {split!r} of dataset {dataset_dir!r} has no shards")
    strategy_rules.check_sharding(sharding, len(paths), num_pipelines, split)
    expansion = GZIP_EXPANSION if meta.compression else 1
    offsets = validation_part.shard_offsets([s.num_examples for s in infos])
    if sharding == BY_FILE or (sharding != BY_RECORD and len(paths) >= num_pipelines):
        mine = list(range(pipeline_id, len(paths), num_pipelines))
        size = sum(infos[i].num_bytes for i in mine) * expansion
        return ShardPlan(BY_FILE, [paths[i] for i in mine], num_pipelines, pipeline_id, size,
                         [offsets[i] for i in mine])
    size = sum(s.num_bytes for s in infos) * expansion // num_pipelines
    return ShardPlan(BY_RECORD, paths, num_pipelines, pipeline_id, size, offsets)


def steps_per_epoch(meta: DatasetMetadata, global_batch_size: int, split: str = "train",
                    validation_fraction: Optional[float] = None) -> int:
    """Full global batches in one pass over `split`'s examples trained on.

    Args:
      meta: The dataset's metadata.
      global_batch_size: Examples per step over all replicas.
      split: The split trained on.
      validation_fraction: The share set aside as the validation part; None: none.

    Raises:
      InvalidInputError: If the split is smaller than one global batch.
    """
    examples = validation_part.split_counts(
        [s.num_examples for s in meta.splits[split].shards], validation_fraction or 0.0,
        validation_fraction is not None).training
    steps = examples // global_batch_size
    if steps < 1:
        raise InvalidInputError(
            f"the {split!r} split has {examples} examples, fewer than one global batch of "
            f"{global_batch_size}; lower batch_size_per_replica or the number of workers")
    return steps


def _records(plan: ShardPlan, compression: str,
             validation_fraction: Optional[float]) -> tf.data.Dataset:
    """The serialized records `plan` keeps, files read in parallel, without the validation
    part's (`validation_input`)."""
    records = validation_input.shard_table(plan.files, plan.offsets).interleave(
        lambda path, offset: validation_input.shard_records(
            path, offset, compression, validation_fraction, validation=False),
        cycle_length=min(len(plan.files), INTERLEAVE_CYCLE),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if plan.mode == BY_RECORD:
        return records.shard(plan.num_pipelines, plan.pipeline_id)
    return records


def _in_memory_batches(records: tf.data.Dataset, parse_batch, batch_size: int,
                       shuffle_seed) -> tf.data.Dataset:
    """The pipeline's whole part, decoded once and cached as one tensor; every epoch is a
    fresh permutation (seeded by epoch) cut into batches by parallel gathers."""
    whole = records.batch(1 << 30).map(parse_batch).cache()  # preprocessed once

    def epoch_batches(epoch, inputs, labels):
        count = tf.shape(labels, out_type=tf.int64)[0]
        order = tf.random.experimental.stateless_shuffle(
            tf.range(count), seed=tf.stack([tf.cast(shuffle_seed, tf.int64), epoch]))

        def take(i):
            picked = order[i * batch_size:(i + 1) * batch_size]
            return tf.gather(inputs, picked), tf.gather(labels, picked)

        return (tf.data.Dataset.range(count // batch_size)
                .map(take, num_parallel_calls=tf.data.AUTOTUNE))

    epochs = tf.data.Dataset.range(1 << 62)
    return tf.data.Dataset.zip((epochs, whole.repeat())).flat_map(
        lambda epoch, data: epoch_batches(epoch, data[0], data[1]))


def _streamed_batches(records: tf.data.Dataset, parse_batch, batch_size: int,
                      shuffle_seed) -> tf.data.Dataset:
    """Records through a shuffle buffer, batched, then parsed a batch at a time."""
    return (records.shuffle(SHUFFLE_BUFFER, seed=shuffle_seed, reshuffle_each_iteration=True)
            .repeat()
            .batch(batch_size, drop_remainder=True)
            .map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE))


def make_input_fn(meta: DatasetMetadata, dataset_dir: str, *, batch_size_per_replica: int,
                  seed: int, split: str = "train", sharding: str = "auto",
                  log: Optional[Callable[[str], None]] = None, wait_meter=None,
                  per_worker_order: bool = False,
                  validation_fraction: Optional[float] = None
                  ) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
    """Returns the `dataset_fn` for `strategy.distribute_datasets_from_function`.

    Args:
      meta: The dataset's metadata.
      dataset_dir: Local dataset directory.
      batch_size_per_replica: Examples per replica per step.
      seed: Shuffle seed.
      split: Split to read.
      sharding: `auto`, `file` or `record` (see `plan_shards`).
      log: Receives one line describing the sharding.
      wait_meter: An `input_wait.InputWaitMeter` measuring how long steps wait.
      per_worker_order: Shuffle with a seed drawn on each worker at run time
        (`parameter_server`, whose workers each read the whole split).
      validation_fraction: The share of the split set aside as the validation
        part, never trained on (`job.validation_part`); None: none.

    Returns:
      A function of an `InputContext` giving an infinite dataset of
      `(preprocessed float32 inputs, int64 labels)` per-replica batches.
    """
    parse = tf_features.parse_fn(meta)
    preprocess = tf_features.preprocess_fn(meta)
    compression = tf_features.compression_type(meta)

    def parse_batch(serialized):
        raw, label = parse(serialized)
        return preprocess(raw), label

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        plan = plan_shards(meta, dataset_dir, split, input_context.num_input_pipelines,
                           input_context.input_pipeline_id, sharding)
        cached = plan.estimated_bytes * DECODED_EXPANSION <= CACHE_LIMIT_BYTES
        if log is not None:
            log(plan.describe() + ("; decoded and cached in memory, reshuffled every epoch"
                                   if cached else "; streamed through a shuffle buffer"))
        shuffle_seed = seed
        if per_worker_order:
            # One graph runs on every parameter_server worker: a seed drawn when it runs
            # gives each worker its own order (a fixed one would give them the same batches).
            shuffle_seed = tf.cast(tf.timestamp() * 1e6, tf.int64) % (2 ** 31)
        records = _records(plan, compression, validation_fraction)
        batches = _in_memory_batches if cached else _streamed_batches
        dataset = batches(records, parse_batch, batch_size_per_replica, shuffle_seed)
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
        if wait_meter is not None:  # on the step's side of `prefetch`: how long each take blocks
            dataset = wait_meter.instrument(dataset)
        options = tf_features.pipeline_options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        return dataset.with_options(options)

    return dataset_fn
