"""The input-bound fraction tells a starved step from a fed one (real tf.data, real Keras fit)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import tensorflow as tf

from kfdist.components.train_distributed.replica.input_wait import InputWaitMeter


def _fit_with_meter(delay_seconds: float, steps: int = 48) -> float:
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
    data = data.map(meter.stamp_ready).prefetch(2).map(meter.record_ready)
    model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(8,))])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=[meter])
    assert meter.steps > 0
    return meter.fraction


def test_a_starved_step_is_reported_input_bound():
    # Each batch takes 20 ms to produce; the step takes well under 1 ms.
    assert _fit_with_meter(0.02) > 0.8


def test_a_fed_step_is_not():
    assert _fit_with_meter(0.0) < 0.2


def test_no_fraction_before_a_measured_step():
    assert InputWaitMeter().fraction is None
