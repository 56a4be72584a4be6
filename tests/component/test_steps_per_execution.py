"""Several steps per call of the train function change the speed, not the training."""

from __future__ import annotations

import hashlib

import pytest

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import tensorflow as tf

from kfdist.components.common import dataset_spec
from kfdist.components.train_distributed.replica import input_pipeline, models


def _trained_weights_digest(dataset_dir: str, steps_per_execution: int) -> str:
    meta = dataset_spec.load_metadata(dataset_dir)
    strategy = tf.distribute.get_strategy()
    batches = strategy.distribute_datasets_from_function(input_pipeline.make_input_fn(
        meta, dataset_dir, batch_size_per_replica=32, seed=7))
    tf.keras.utils.set_random_seed(7)
    model = models.build_model("mnist_mlp", meta)
    models.compile_model(model, 0.001, steps_per_execution=steps_per_execution)
    steps = input_pipeline.steps_per_epoch(meta, 32)
    assert steps_per_execution == 1 or steps % steps_per_execution  # a shorter last call
    model.fit(batches, epochs=2, steps_per_epoch=steps, verbose=0)
    return hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()


@pytest.mark.parametrize("steps_per_execution", [8, 16])
def test_more_steps_per_call_train_the_same_weights(digits_dataset, steps_per_execution):
    assert (_trained_weights_digest(digits_dataset, steps_per_execution)
            == _trained_weights_digest(digits_dataset, 1))
