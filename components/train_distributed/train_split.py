"""The training step's train split against its job: checked before anything is created
(`check_dataset`), and the batch per replica lowered to fit a split smaller than one global
batch (`fitted_batch`), after the validation part early stopping scores is set aside."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional, Tuple

from kfdist.components.common import dataset_spec
from kfdist.components.common.errors import require
from kfdist.components.train_distributed.job import config, strategy_rules, validation_part
from kfdist.components.train_distributed.replica import models


def check_dataset(dataset_dir: str, training: config.TrainingConfig,
                  spec: config.JobSpec) -> dataset_spec.DatasetMetadata:
    """The dataset's metadata, once its train split fits the job: the model takes it, a
    validation part can be set aside, every process gets an example, the shards exist."""
    meta = dataset_spec.load_metadata(dataset_dir)
    models.check_compatible(training.model_name, meta)
    require("train" in meta.splits, f"dataset {dataset_dir!r} has no 'train' split")
    counts = train_counts(training, meta)
    require(not training.holds_out_validation or counts.validation >= 1,
            f"validation_fraction={training.validation_fraction} of a train split of "
            f"{counts.training} examples sets none aside for early stopping; raise "
            "validation_fraction, or set early_stopping_patience=0")
    pipelines = spec.input_pipelines(training.strategy)
    strategy_rules.batch_for_split(counts.training, training.batch_size_per_replica, pipelines)
    train_files = meta.shard_paths(dataset_dir, "train")
    strategy_rules.check_sharding(training.input_sharding, len(train_files), pipelines)
    for path in train_files:
        require(os.path.isfile(path), f"dataset {dataset_dir!r} lacks its train shard {path!r}")
    if spec.evaluator:
        require("eval" in meta.splits and meta.splits["eval"].num_examples > 0,
                f"evaluator=True needs an 'eval' split, and dataset {dataset_dir!r} has none; "
                "shard with eval_fraction > 0 or set evaluator=False")
    return meta


def train_counts(training: config.TrainingConfig, meta: dataset_spec.DatasetMetadata):
    """How many train examples `fit` trains on and how many are the validation part."""
    return validation_part.split_counts([s.num_examples for s in meta.splits["train"].shards],
                                        training.validation_fraction,
                                        training.holds_out_validation)


def fitted_batch(training: config.TrainingConfig, spec: config.JobSpec,
                 meta: dataset_spec.DatasetMetadata, log: Callable[[str], None]
                 ) -> Tuple[config.TrainingConfig, Optional[int]]:
    """`training` with a batch that fits its train split (`strategy_rules.batch_for_split`),
    and that batch when it is lower than the one asked for (said in the log), else None."""
    examples = train_counts(training, meta).training
    pipelines = spec.input_pipelines(training.strategy)
    asked = training.batch_size_per_replica
    batch = strategy_rules.batch_for_split(examples, asked, pipelines)
    if batch == asked:
        return training, None
    log(f"train_distributed: the train split has {examples} examples to train on, fewer than "
        f"one global batch of {asked} x {pipelines} training processes: training with "
        f"batch_size_per_replica={batch} instead, one step per epoch")
    return dataclasses.replace(training, batch_size_per_replica=batch), batch
