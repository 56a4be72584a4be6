"""How much of the training steps' time waits for input: the input-bound fraction.

An accelerator that waits for the next batch is an idle accelerator. The
meter measures that wait inside the input pipeline, on the side of the
training step:

* the last stage of the pipeline (`instrument`) zips a clock with the
  prefetched batches: asked for a batch, it first reads the time, then takes
  the batch from the prefetch buffer, blocking while the producers have none
  ready, then reads the time again; the difference is how long the step
  waited, added to a counter in TensorFlow (no Python per step);
* the Keras callback times the epochs' steps (it runs before the callbacks
  that validate or save).

A take of a batch that is ready still costs the clocks and the hand-over
(tens of microseconds, a few per cent of a millisecond step): the meter
measures that cost once, as it is created, on batches that are always
ready (the median of `_PROBE_TAKES` takes), and only the time above it
counts as waiting. The
input-bound fraction is the total wait over the total time of the steps.
The first batch is left out of both: it waits for the pipeline to
fill (the whole split, when it is decoded once into memory) after the step
function was traced, a one-off cost that shows in the first epoch's time
instead. Because the clock is in the pipeline, it holds however many steps
one call of the train function runs (`steps_per_execution`). Where a
distribution strategy buffers batches per device after the pipeline, the
wait is that buffer's, which only errs towards reporting one.
"""

from __future__ import annotations

import time
from typing import Optional

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import numpy as np
import tensorflow as tf

#: Takes of always-ready batches that measure the cost of a take (after as many to warm up).
_PROBE_TAKES = 200


def _clocked(batches: tf.data.Dataset) -> tf.data.Dataset:
    """`(time asked, batch)`: the clock is read before the batch is taken."""
    asked = tf.data.Dataset.range(1 << 62).map(lambda _: tf.timestamp())
    return tf.data.Dataset.zip((asked, batches))


def _handover_seconds() -> float:
    """The median time to take a batch that is ready, clocks included."""
    ready = tf.data.Dataset.from_tensors(tf.zeros([64, 32])).repeat().prefetch(4)
    takes = _clocked(ready).map(lambda asked, batch: tf.timestamp() - asked)
    spent = [float(t) for _, t in zip(range(2 * _PROBE_TAKES), takes)]
    return float(np.median(spent[_PROBE_TAKES:]))


class InputWaitMeter(tf.keras.callbacks.Callback):
    """Measures the input-bound fraction of `fit`; create it outside any strategy scope."""

    def __init__(self):
        super().__init__()
        self._waited = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="input_wait_seconds")
        self._taken = tf.Variable(0, dtype=tf.int64, trainable=False, name="input_batches_taken")
        self._first_taken_at = tf.Variable(0.0, dtype=tf.float64, trainable=False,
                                           name="input_first_taken_at")
        self._handover = _handover_seconds()
        self._epoch_began = 0.0
        self._train_began: Optional[float] = None
        self._epochs_seconds = 0.0

    def instrument(self, batches: tf.data.Dataset) -> tf.data.Dataset:
        """The pipeline's last stage (after `prefetch`): counts how long each take blocks."""
        return _clocked(batches).map(self._record)

    def _record(self, asked, batch):
        taken = tf.timestamp()
        first = tf.equal(self._taken.assign_add(1), 1)
        zero = tf.constant(0.0, tf.float64)
        waited = tf.maximum(zero, taken - asked - self._handover)
        updates = [self._waited.assign_add(tf.where(first, zero, waited)),
                   self._first_taken_at.assign(tf.where(first, taken, self._first_taken_at))]
        with tf.control_dependencies(updates):
            return tf.nest.map_structure(tf.identity, batch)

    def on_train_begin(self, logs=None):
        self._train_began = time.time()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_began = time.time()

    def on_epoch_end(self, epoch, logs=None):
        self._epochs_seconds += time.time() - self._epoch_began

    @property
    def wait_seconds(self) -> float:
        """Seconds the steps waited for a batch (beyond a ready batch's take), the first left out."""
        return float(self._waited.numpy())

    @property
    def fraction(self) -> Optional[float]:
        """Waiting time over step time (None before two batches were taken)."""
        if int(self._taken.numpy()) < 2 or self._train_began is None:
            return None
        # The first batch's take, and the tracing before it, are no step's time.
        before_first = max(0.0, float(self._first_taken_at.numpy()) - self._train_began)
        steps = self._epochs_seconds - before_first
        return min(1.0, self.wait_seconds / steps) if steps > 0 else None
