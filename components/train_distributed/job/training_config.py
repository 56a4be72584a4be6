"""What to train and how (`TrainingConfig`): model, epochs, batch, optimiser, seed, distribution
strategy and early stopping; identical in every replica, checked before anything is launched.
`config` re-exports it beside the job's other records."""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from kfdist.components.common.errors import require
from kfdist.components.train_distributed.job import strategy_rules


#: Training steps per call of the compiled train function (Keras's `steps_per_execution`).
#: A call runs its steps in one TensorFlow loop instead of a Python round trip per step,
#: which small steps (an MLP on CPU) feel as much as a third of their time; the updates
#: are the same, in the same order.
STEPS_PER_EXECUTION = 16
#: Epochs without a lower validation loss before training stops (the best epoch is kept).
EARLY_STOPPING_PATIENCE = 5
#: How far below the best validation loss an epoch's must be to count as lower (Keras's
#: `min_delta`): on a small validation part the loss creeps towards zero long after the
#: held-out loss has turned (scikit-learn's wine: epoch 30 kept, its held-out loss three times
#: the lowest; with 0.001, epoch 11 of 16).
EARLY_STOPPING_MIN_DELTA = 0.001
#: Share of the train split set aside as the validation part that picks the epoch kept.
VALIDATION_FRACTION = 0.1
#: The largest validation part: at least half the train split still trains.
MAX_VALIDATION_FRACTION = 0.5


def is_whole_number(value: object) -> bool:
    """Whether `value` is an int and not a bool (JSON and KFP hand both)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_number(value: object) -> bool:
    """Whether `value` is a finite int or float and not a bool."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """What every replica trains, and how.

    Attributes:
      model_name: A built-in model (`models.BUILTIN_MODELS`), a user model
        `package.module:function`, or empty: chosen by the dataset.
      epochs: Passes over the training split.
      batch_size_per_replica: Examples per replica per step; the global batch
        is this times the number of replicas in sync.
      learning_rate: Adam learning rate.
      seed: Seed of weight initialisation, dropout and shuffling.
      strategy: Distribution strategy name, one of `strategy_rules.STRATEGIES`.
      input_sharding: How each worker's input pipeline takes its part of the
        training files: `file` (whole files; needs at least as many files as
        pipelines), `record` (every n-th record of every file) or `auto`
        (by file when there are enough files, else by record).
      steps_per_execution: Training steps per call of the compiled train
        function; 1: a call per step, as Keras's default.
      early_stopping_patience: Epochs without a lower loss on the validation
        part (by more than `early_stopping_min_delta`) before training stops;
        the last epoch that lowered it is kept (its weights restored). None: no
        early stopping and no validation part: every epoch trains on the whole
        train split and the last is kept.
      validation_fraction: Share of the train split set aside as the
        validation part (`job.validation_part`; never the eval split) when
        early stopping is on.
      early_stopping_min_delta: How far below the best epoch's loss on the
        validation part a later epoch's must be to count as lower (Keras's
        `min_delta`); 0: any lower loss.
    """

    model_name: str
    epochs: int
    batch_size_per_replica: int
    learning_rate: float
    seed: int
    strategy: str
    input_sharding: str = "auto"
    steps_per_execution: int = STEPS_PER_EXECUTION
    early_stopping_patience: Optional[int] = EARLY_STOPPING_PATIENCE
    validation_fraction: float = VALIDATION_FRACTION
    early_stopping_min_delta: float = EARLY_STOPPING_MIN_DELTA

    @property
    def holds_out_validation(self) -> bool:
        """Whether a validation part is carved from the train split (early stopping is on)."""
        return self.early_stopping_patience is not None

    def validate(self) -> None:
        """Checks the values that need no dataset and no model import.

        Raises:
          InvalidInputError: Naming the first invalid value.
        """
        require(isinstance(self.model_name, str) and self.model_name == self.model_name.strip(),
                f"model_name must be a model name (or empty: chosen by the data), "
                f"got {self.model_name!r}")
        require(is_whole_number(self.epochs) and self.epochs >= 1,
                f"epochs must be an integer >= 1, got {self.epochs!r}")
        require(is_whole_number(self.batch_size_per_replica) and self.batch_size_per_replica >= 1,
                f"batch_size_per_replica must be an integer >= 1, got {self.batch_size_per_replica!r}")
        require(is_finite_number(self.learning_rate) and self.learning_rate > 0,
                f"learning_rate must be a finite number > 0, got {self.learning_rate!r}")
        require(is_whole_number(self.seed) and self.seed >= 0,
                f"seed must be an integer >= 0, got {self.seed!r}")
        require(self.strategy in strategy_rules.STRATEGIES,
                f"unknown strategy {self.strategy!r}; valid strategies: {list(strategy_rules.STRATEGIES)}")
        require(self.input_sharding in strategy_rules.INPUT_SHARDINGS,
                f"input_sharding must be one of {list(strategy_rules.INPUT_SHARDINGS)}, got {self.input_sharding!r}")
        require(is_whole_number(self.steps_per_execution) and self.steps_per_execution >= 1,
                f"steps_per_execution must be an integer >= 1, got {self.steps_per_execution!r}")
        require(self.early_stopping_patience is None or (
            is_whole_number(self.early_stopping_patience) and self.early_stopping_patience >= 1),
            f"early_stopping_patience must be an integer >= 1, or 0 for no early stopping, "
            f"got {self.early_stopping_patience!r}")
        require(is_finite_number(self.validation_fraction)
                and 0 < self.validation_fraction <= MAX_VALIDATION_FRACTION,
                f"validation_fraction must be a number in (0, {MAX_VALIDATION_FRACTION}], "
                f"got {self.validation_fraction!r}")
        require(is_finite_number(self.early_stopping_min_delta)
                and self.early_stopping_min_delta >= 0,
                f"early_stopping_min_delta must be a finite number >= 0, "
                f"got {self.early_stopping_min_delta!r}")
