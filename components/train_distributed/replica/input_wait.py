"""How much of each training step waits for its input: the input-bound fraction.

An accelerator that waits for the next batch is an idle accelerator. The
meter measures that wait per step, from two clocks:

* the input pipeline stamps every batch with the time it was ready (the
  stage before `prefetch`, in the producer's thread) and carries the stamp
  across `prefetch`; the stage after it (the step's side) stores the stamp
  of the batch the step takes;
* the Keras callback notes when each step began and ended.

A batch ready before its step began cost no wait; otherwise the step waited
`ready - begin` (at most the step's time). The input-bound fraction is the
total wait over the total step time of the steps measured: one in
`SAMPLE_EVERY` (reading the stamp costs a little, which small steps would
feel). The first measured step of a run is left out: it
traces the step function and fills the pipeline, a one-off cost that shows in
the first epoch's time instead. Where a distribution strategy buffers one
more batch per device after the pipeline, the stored stamp can be one batch
ahead, which only errs towards reporting a wait.
"""

from __future__ import annotations

import time
from typing import Optional

import kfdist  # noqa: F401  (selects legacy Keras before TensorFlow loads)
import tensorflow as tf

#: Measure one step in this many.
SAMPLE_EVERY = 4


class InputWaitMeter(tf.keras.callbacks.Callback):
    """Measures the input-bound fraction of `fit`; create it outside any strategy scope."""

    def __init__(self):
        super().__init__()
        self._supports_tf_logs = True  # never needs the step's logs as numpy (no extra sync)
        self._sampled = False
        self._ready = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="input_ready_time")
        self._begin = 0.0
        self._first = True
        self._count = 0
        self.wait_seconds = 0.0
        self.step_seconds = 0.0
        self.steps = 0

    @staticmethod
    def stamp_ready(features, labels):
        """Pipeline stage before `prefetch`: adds the time the batch is ready."""
        return features, labels, tf.timestamp()

    def record_ready(self, features, labels, ready):
        """Pipeline stage after `prefetch`: stores the stamp of the batch being taken."""
        with tf.control_dependencies([self._ready.assign(ready)]):
            return tf.identity(features), tf.identity(labels)

    def on_train_batch_begin(self, batch, logs=None):
        self._count += 1
        self._sampled = self._count % SAMPLE_EVERY == 1  # the first step is sampled (and skipped)
        if self._sampled:
            self._begin = time.time()

    def on_train_batch_end(self, batch, logs=None):
        if not self._sampled:
            return
        end = time.time()
        if self._first:
            self._first = False
            return
        ready = float(self._ready.numpy())
        step = max(end - self._begin, 1e-9)
        self.wait_seconds += min(max(0.0, ready - self._begin), step)
        self.step_seconds += step
        self.steps += 1

    @property
    def fraction(self) -> Optional[float]:
        """Waiting time over step time (None before two steps have run)."""
        if self.steps == 0:
            return None
        return self.wait_seconds / self.step_seconds
