"""The replicas' input pipelines run without tf.data's autotune thread.

With it, TensorFlow 2.21 destroys an iterator only when that thread next
wakes, up to 60 s later: `fit` returned 18-30 s after its last epoch. The
pipelines must still deliver every example.
"""

from __future__ import annotations

import pytest
import tensorflow as tf

from kfdist.components.common.dataset_spec import load_metadata
from kfdist.components.shard_dataset.runtime import shard
from kfdist.sample_data import write_mnist_sample


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("input-options")
    write_mnist_sample(str(root / "source"))
    shard(str(root / "source"), str(root / "dataset"), num_shards=2, log=lambda line: None)
    return str(root / "dataset")


def test_training_batches_come_without_an_autotune_thread(dataset):
    from kfdist.components.train_distributed.replica import input_pipeline

    meta = load_metadata(dataset)
    fn = input_pipeline.make_input_fn(meta, dataset, batch_size_per_replica=32, seed=1)
    data = fn(tf.distribute.InputContext())
    assert data.options().autotune.enabled is False
    steps = input_pipeline.steps_per_epoch(meta, 32)
    labels = [y for _, y in data.take(steps)]
    assert sum(len(y) for y in labels) == steps * 32 <= meta.splits["train"].num_examples


def test_eval_batches_come_without_an_autotune_thread(dataset):
    from kfdist.components.train_distributed.replica import eval_split

    meta = load_metadata(dataset)
    batches = eval_split.eval_batches(meta, dataset)
    assert batches.options().autotune.enabled is False
    assert sum(len(y) for _, y in batches) == meta.splits["eval"].num_examples
