"""TensorBoard event files of a training run, written as it trains.

Under the Model artifact's `tensorboard/` (and, on a cluster, the same path under the job's
shared model location, published after every epoch with the rest of the training state):

    tensorboard/train/       the leader's per-epoch loss, accuracy, learning rate, examples/s
    tensorboard/validation/  the leader's per-epoch loss and accuracy on the held-out eval split
    tensorboard/validation_part/  the same on the validation part of the train split, which
                             selects the epoch kept (early stopping)
    tensorboard/evaluator/   the side-car evaluator's loss and accuracy per checkpoint's epoch

Names follow Keras's TensorBoard callback (`epoch_loss`, `epoch_accuracy`, ...), so the train
and validation curves share a chart. `kfdist tensorboard PATH` serves them.
"""

from __future__ import annotations

import os
from typing import Dict, Mapping, Optional

import tensorflow as tf

from kfdist.components.common import model_artifact, storage

TRAIN, VALIDATION, EVALUATOR = "train", "validation", "evaluator"
VALIDATION_PART = "validation_part"
VALIDATION_PREFIX = "val_"
#: The validation part's metrics in the logs (`kept_epoch.SELECTION_LOSS`, ...).
SELECTION_PREFIX = "selection_"
_writers: Dict[str, "tf.summary.SummaryWriter"] = {}


def _writer(directory: str):
    if directory not in _writers:
        _writers[directory] = tf.summary.create_file_writer(directory)
    return _writers[directory]


def write_scalars(directory: str, step: int, values: Mapping[str, float]) -> None:
    """Writes `epoch_<name>` scalars at `step` into the event file of `directory`, flushed."""
    writer = _writer(directory)
    with writer.as_default():
        for name, value in sorted(values.items()):
            tf.summary.scalar(f"epoch_{name}", float(value), step=step)
    writer.flush()


def split_logs(logs: Mapping[str, float]) -> tuple:
    """({training metric: value}, {validation metric: value}) of an epoch's Keras logs."""
    train = {k: v for k, v in logs.items() if not k.startswith(VALIDATION_PREFIX)}
    validation = {k[len(VALIDATION_PREFIX):]: v for k, v in logs.items()
                  if k.startswith(VALIDATION_PREFIX)}
    return train, validation


def learning_rate(optimizer) -> Optional[float]:
    """The optimizer's current learning rate (a schedule's value at its current step)."""
    rate = getattr(optimizer, "learning_rate", None)
    if rate is None:
        return None
    if callable(rate) and not isinstance(rate, tf.Variable):
        rate = rate(optimizer.iterations)
    return float(tf.keras.backend.get_value(rate))


class EpochSummaries(tf.keras.callbacks.Callback):
    """The leader's per-epoch TensorBoard scalars (after the validation added its metrics)."""

    def __init__(self, model_dir: str, examples_per_epoch: int, history):
        super().__init__()
        self._root = os.path.join(model_dir, model_artifact.TENSORBOARD_DIR)
        self._examples_per_epoch = examples_per_epoch
        self._history = history  # the `HistoryWriter`, an earlier callback: the steps' seconds

    def on_epoch_end(self, epoch, logs=None):
        seconds = self._history.steps_seconds
        train, validation = split_logs({k: float(v) for k, v in (logs or {}).items()})
        train["examples_per_second"] = self._examples_per_epoch / max(seconds, 1e-9)
        rate = learning_rate(self.model.optimizer)
        if rate is not None:
            train["learning_rate"] = rate
        selection = {k[len(SELECTION_PREFIX):]: train.pop(k) for k in list(train)
                     if k.startswith(SELECTION_PREFIX)}
        write_scalars(os.path.join(self._root, TRAIN), epoch + 1, train)
        if validation:
            write_scalars(os.path.join(self._root, VALIDATION), epoch + 1, validation)
        if selection:
            write_scalars(os.path.join(self._root, VALIDATION_PART), epoch + 1, selection)


def write_evaluation(model_dir: str, state_uri: Optional[str], epoch: int,
                     metrics: Mapping[str, float]) -> None:
    """Writes one side-car evaluation at `epoch`; on a cluster also publishes its event files."""
    local = os.path.join(model_dir, model_artifact.TENSORBOARD_DIR, EVALUATOR)
    write_scalars(local, epoch, metrics)
    if state_uri:
        storage.copy_dir_to(local, storage.join(state_uri, model_artifact.TENSORBOARD_DIR,
                                                EVALUATOR))
