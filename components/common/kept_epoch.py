"""Which epoch a training run keeps, and why: the early-stopping rule, defined once.

The rule is Keras's `EarlyStopping(monitor=..., patience=p, restore_best_weights=True)`:
the best epoch is the first with the lowest loss on the validation part (a part
of the train split, `job.validation_part`); training stops once `p` epochs
have passed without a lower one; the best epoch's weights are the ones saved.
Here it is a pure function of the losses so far, so that a replica restarted
from a backup recomputes it from the history instead of keeping it in memory,
and one replica decides for all.

The replica (`replica.early_stopping`), the step's report, `kfdist run`'s
console and summary and the evaluation report all read the result from here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Mapping, Optional, Sequence

#: The loss and accuracy on the validation part, per epoch, in `history.json` and the epoch
#: lines: the figures that select the epoch kept (`val_loss` and `val_accuracy` are the
#: held-out eval split's, which never select).
SELECTION_LOSS = "selection_loss"
SELECTION_ACCURACY = "selection_accuracy"


@dataclasses.dataclass(frozen=True)
class Decision:
    """What early stopping makes of the losses so far.

    Attributes:
      best_epoch: The first epoch (from 1) with the lowest finite loss; None before any.
      improved: Whether the latest epoch is that epoch.
      stop: Whether `patience` epochs have passed since it without a lower loss.
    """

    best_epoch: Optional[int]
    improved: bool
    stop: bool


def decide(losses: Sequence[Optional[float]], patience: int) -> Decision:
    """The early-stopping decision after `len(losses)` epochs.

    Args:
      losses: Each epoch's loss on the validation part, from epoch 1 (None or NaN:
        not measured, never the best).
      patience: Epochs without a lower loss before training stops.

    Returns:
      The best epoch so far, whether the latest is it, and whether to stop.
    """
    best, lowest = None, math.inf
    for epoch, loss in enumerate(losses, start=1):
        if loss is not None and math.isfinite(loss) and loss < lowest:
            best, lowest = epoch, loss
    epochs = len(losses)
    return Decision(best, epochs > 0 and best == epochs, epochs - (best or 0) >= patience)


@dataclasses.dataclass(frozen=True)
class KeptEpoch:
    """The epoch whose weights a run saved.

    Attributes:
      epoch: The epoch kept, from 1.
      epochs_run: Epochs trained.
      epochs_planned: Epochs the run would train without early stopping.
      patience: The early-stopping patience; None: early stopping was off.
      stopped_early: Whether training stopped before `epochs_planned`.
      validation_loss: The kept epoch's loss on the validation part (None without one).
    """

    epoch: int
    epochs_run: int
    epochs_planned: int
    patience: Optional[int] = None
    stopped_early: bool = False
    validation_loss: Optional[float] = None

    def describe(self) -> str:
        """Which epoch was kept and why, in one line."""
        if self.patience is None:
            return (f"kept the last epoch, {self.epoch} of {self.epochs_planned}: early "
                    "stopping is off")
        lowest = ("the lowest validation loss" if self.validation_loss is None
                  else f"the lowest validation loss, {self.validation_loss:.4f}")
        if self.stopped_early:
            return (f"kept epoch {self.epoch} ({lowest}); stopped after epoch "
                    f"{self.epochs_run} of {self.epochs_planned}: no lower validation loss in "
                    f"the {self.epochs_run - self.epoch} epochs after it (patience "
                    f"{self.patience})")
        if self.epoch == self.epochs_run:
            return f"kept the last epoch, {self.epoch} of {self.epochs_planned} ({lowest})"
        return (f"kept epoch {self.epoch} of {self.epochs_run} ({lowest}; no lower one in the "
                f"{self.epochs_run - self.epoch} epochs after it)")

    def metric_values(self) -> Dict[str, float]:
        """The figures as the training step's metrics (numbers only, as KFP keeps them)."""
        values = {"kept_epoch": float(self.epoch), "epochs_run": float(self.epochs_run),
                  "epochs_planned": float(self.epochs_planned),
                  "stopped_early": float(self.stopped_early),
                  "early_stopping_patience": float(self.patience or 0)}
        if self.validation_loss is not None:
            values["kept_validation_loss"] = float(self.validation_loss)
        return values

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, Any]) -> Optional["KeptEpoch"]:
        """The kept epoch a training step's metrics record (`metric_values`); None without."""
        if metrics.get("kept_epoch") is None:
            return None
        loss = metrics.get("kept_validation_loss")
        return cls(int(metrics["kept_epoch"]), int(metrics["epochs_run"]),
                   int(metrics["epochs_planned"]),
                   int(metrics["early_stopping_patience"]) or None,
                   bool(metrics.get("stopped_early")), None if loss is None else float(loss))

    def summary(self) -> Dict[str, Any]:
        """The figures for a run's `summary.json`."""
        return {"kept_epoch": self.epoch, "epochs_run": self.epochs_run,
                "stopped_early": self.stopped_early, "early_stopping_patience": self.patience,
                "kept_validation_loss": self.validation_loss, "kept_why": self.describe()}
