"""Validation after every epoch: the leader scores the model on the validation part and the
eval split.

The leader replica (the chief, worker 0, Horovod rank 0 or a lone replica)
builds once, outside any strategy, a plain copy of the model. After every
epoch it copies the trained weights into that copy and scores, each in a
`tf.function`, the validation part of the train split (`selection_loss`,
`selection_accuracy`: what early stopping selects the epoch by) and the
held-out eval split (`val_loss`, `val_accuracy`: shown, never used to
choose). Nothing here is a collective op, so it works alike under every
strategy; the other replicas wait for the leader at the next collective
(early stopping's decision, or the next epoch's first synchronised step).

The figures are the ones `evaluate_model` computes for the same weights: the
mean sparse categorical cross-entropy of the predicted probabilities (the
softmax of the output when the last layer is linear, i.e. emits logits),
clipped to [1e-7, 1], and the share of examples whose argmax is the label; for a
regression, the mean squared error and its root (`selection_rmse`, `val_rmse`).
"""

from __future__ import annotations

from typing import Dict, List, Optional

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import numpy as np
import tensorflow as tf

from kfdist.components.common import dataset_spec
from kfdist.components.common.serving_model import outputs_are_logits
from kfdist.components.common.kept_epoch import SELECTION_ACCURACY, SELECTION_LOSS
from kfdist.components.train_distributed.replica import eval_split, models, validation_input

VAL_LOSS = "val_loss"
VAL_ACCURACY = "val_accuracy"
#: A regression's root mean squared error on the validation part and on the eval split.
SELECTION_RMSE, VAL_RMSE = "selection_rmse", "val_rmse"
_MIN_PROBABILITY = 1e-7


def _is_sync_on_read(variable) -> bool:
    return (isinstance(variable, tf.distribute.DistributedValues)
            and getattr(variable, "synchronization", None) == tf.VariableSynchronization.ON_READ)


def _local_value(variable) -> np.ndarray:
    """This process's value of a sync-on-read variable, read without an all-reduce.

    Reading it across replicas (what `get_weights` does) all-reduces it over
    every worker, a collective the other workers would never join. Its local
    copies are reduced here instead, as its aggregation says.
    """
    copies = [np.asarray(v.numpy()) for v in variable.values]
    if variable.aggregation == tf.VariableAggregation.SUM:
        return np.sum(copies, axis=0)
    if variable.aggregation == tf.VariableAggregation.MEAN:
        return np.mean(copies, axis=0).astype(copies[0].dtype)
    return copies[0]


def local_weights(model: tf.keras.Model) -> List[np.ndarray]:
    """A (possibly distributed) model's weights, read in this process without a collective.

    Sync-on-read variables (e.g. a user model's BatchNormalization statistics
    under MultiWorkerMirrored) are taken from this worker's own copies: under
    more than one worker they may differ a little from the saved model's.

    Args:
      model: The model being trained, built under the strategy.
    """
    if not any(_is_sync_on_read(v) for v in model.weights):
        return model.get_weights()
    return [_local_value(v) if _is_sync_on_read(v) else v.numpy() for v in model.weights]


def copy_weights(model: tf.keras.Model, plain: tf.keras.Model) -> None:
    """Copies a (possibly distributed) model's weights into a plain copy of it, locally
    (`local_weights`).

    Args:
      model: The model being trained, built under the strategy.
      plain: The same architecture built without a strategy.
    """
    plain.set_weights(local_weights(model))


def _scorer(model: tf.keras.Model, batches: tf.data.Dataset, logits: bool):
    """A `tf.function` returning `(summed loss, correct predictions, examples)` over `batches`."""

    @tf.function
    def score():
        loss_sum = tf.constant(0.0, tf.float64)
        correct = tf.constant(0, tf.int64)
        count = tf.constant(0, tf.int64)
        for x, y in batches:
            out = model(x, training=False)
            probs = tf.cast(tf.nn.softmax(out) if logits else out, tf.float32)
            labels = tf.cast(tf.reshape(y, [-1]), tf.int64)
            picked = tf.cast(tf.gather(probs, labels, axis=1, batch_dims=1), tf.float64)
            loss_sum -= tf.reduce_sum(tf.math.log(tf.clip_by_value(picked, _MIN_PROBABILITY, 1.0)))
            predicted = tf.argmax(probs, axis=1, output_type=tf.int64)
            correct += tf.reduce_sum(tf.cast(tf.equal(predicted, labels), tf.int64))
            count += tf.size(labels, out_type=tf.int64)
        return loss_sum, correct, count

    return score


def _regression_scorer(model: tf.keras.Model, batches: tf.data.Dataset):
    """A `tf.function` returning `(summed squared error, 0, examples)` over `batches` (the
    second, a classifier's correct predictions, has no meaning here)."""

    @tf.function
    def score():
        squares = tf.constant(0.0, tf.float64)
        count = tf.constant(0, tf.int64)
        for x, y in batches:
            out = tf.cast(tf.reshape(model(x, training=False), [-1]), tf.float64)
            squares += tf.reduce_sum(tf.square(out - tf.cast(tf.reshape(y, [-1]), tf.float64)))
            count += tf.size(y, out_type=tf.int64)
        return squares, tf.constant(0, tf.int64), count

    return score


class EpochValidation:
    """Scores the current weights of a training model on the validation part and the eval split.

    Build it outside the strategy's scope; call it with the training model
    after an epoch.
    """

    def __init__(self, model_name: str, meta: dataset_spec.DatasetMetadata, dataset_dir: str,
                 validation_fraction: Optional[float] = None, eval_split_too: bool = True):
        """Builds the plain model copy and the inputs it scores.

        Args:
          model_name: The model's registry name (`models.build_model`).
          meta: The dataset's metadata.
          dataset_dir: The dataset directory (local).
          validation_fraction: The validation part's share of the train split; None: none.
          eval_split_too: Whether to score the eval split as well.
        """
        self._plain = models.build_model(model_name, meta)
        self._regression = meta.is_regression
        logits = not self._regression and outputs_are_logits(self._plain)
        second = (SELECTION_RMSE, VAL_RMSE) if self._regression else (SELECTION_ACCURACY,
                                                                      VAL_ACCURACY)
        parts = []
        if validation_fraction is not None:
            parts.append((SELECTION_LOSS, second[0], validation_input.validation_batches(
                meta, dataset_dir, validation_fraction)))
        if eval_split_too:
            parts.append((VAL_LOSS, second[1], eval_split.eval_batches(meta, dataset_dir)))

        def scorer(batches: tf.data.Dataset):
            batches = batches.prefetch(tf.data.AUTOTUNE)
            return (_regression_scorer(self._plain, batches) if self._regression
                    else _scorer(self._plain, batches, logits))

        self._scores = [(loss, figure, scorer(batches)) for loss, figure, batches in parts]

    def __call__(self, model: tf.keras.Model) -> Dict[str, float]:
        """Returns the loss and accuracy of `model`'s current weights on each part
        (`selection_loss`, `selection_accuracy`, `val_loss`, `val_accuracy`; for a
        regression `selection_rmse` and `val_rmse` instead of the accuracies).

        Args:
          model: The model being trained (its architecture is the plain copy's).
        """
        copy_weights(model, self._plain)
        figures = {}
        for loss_key, accuracy_key, score in self._scores:
            loss_sum, correct, count = (int(t) if t.dtype.is_integer else float(t)
                                        for t in score())
            count = max(count, 1)
            second = (loss_sum / count) ** 0.5 if self._regression else correct / count
            figures.update({loss_key: loss_sum / count, accuracy_key: second})
        return figures


def for_replica(leader: bool, model_name: str, meta: dataset_spec.DatasetMetadata,
                dataset_dir: str,
                validation_fraction: Optional[float] = None) -> Optional[EpochValidation]:
    """The per-epoch validation of a replica: the leader's, on the validation part (with
    early stopping) and on the eval split (when the dataset has eval examples).

    Args:
      leader: Whether this replica is the job's leader (`Role.leader`).
      model_name: The model's registry name.
      meta: The dataset's metadata.
      dataset_dir: The dataset directory (local).
      validation_fraction: The validation part's share of the train split; None: none.

    Returns:
      The validation, or None: on every other replica, or with nothing to score.
    """
    split = meta.splits.get(eval_split.EVAL_SPLIT)
    has_eval = split is not None and split.num_examples > 0
    if not leader or not (has_eval or validation_fraction is not None):
        return None
    return EpochValidation(model_name, meta, dataset_dir, validation_fraction, has_eval)
