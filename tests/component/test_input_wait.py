"""The input-bound fraction tells a starved step from a fed one (real tf.data, real Keras fit)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import tensorflow as tf

from kfdist.components.train_distributed.replica.input_wait import InputWaitMeter


def _fit_with_meter(delay_seconds: float, steps: int = 48, steps_per_execution: int = 1) -> float:
    meter = InputWaitMeter()
    x = np.random.default_rng(0).random((steps * 32, 8), dtype=np.float32)
    y = np.zeros((steps * 32,), np.int64)

    def slow(features, labels):
        def wait(value):
            time.sleep(delay_seconds)
            return value
        return tf.py_function(wait, [features], tf.float32), labels

    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat()
    if delay_seconds:
        data = data.map(slow)
    data = meter.instrument(data.prefetch(2))
    # Steps of about a millisecond on an idle machine (some 20 ms on a busy one): well under
    # the starved producer's 200 ms, well over what a fed pipeline needs to hand over a batch.
    model = tf.keras.Sequential([tf.keras.layers.Dense(1024, input_shape=(8,)),
                                 tf.keras.layers.Dense(1024), tf.keras.layers.Dense(2)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=steps_per_execution)
    model.fit(data, steps_per_epoch=steps, epochs=2, verbose=0, callbacks=[meter])
    if delay_seconds:  # every batch but the first waited about the delay
        assert meter.wait_seconds == pytest.approx((2 * steps - 1) * delay_seconds, rel=0.5)
    return meter.fraction


@pytest.mark.parametrize("steps_per_execution", [1, 8])
def test_a_starved_step_is_reported_input_bound(steps_per_execution):
    # Each batch takes 200 ms to produce.
    assert _fit_with_meter(0.2, steps=8, steps_per_execution=steps_per_execution) > 0.8


@pytest.mark.parametrize("steps_per_execution", [1, 8])
def test_a_fed_step_is_not(steps_per_execution):
    assert _fit_with_meter(0.0, steps_per_execution=steps_per_execution) < 0.2


def test_no_fraction_before_a_measured_step():
    assert InputWaitMeter().fraction is None


def test_the_cost_of_taking_a_ready_batch_is_measured_and_small():
    from kfdist.components.train_distributed.replica.input_wait import _handover_seconds

    assert 0.0 < _handover_seconds() < 0.005
