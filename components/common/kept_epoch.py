"""Which epoch a training run keeps, and why: the early-stopping rule, defined once.

The rule is Keras's `EarlyStopping(monitor=..., patience=p, min_delta=d,
restore_best_weights=True)`: an epoch improves when its loss on the validation
part (a part of the train split, `job.validation_part`) is more than `d` below
the best epoch's; the best epoch is the last that improved; training stops once
`p` epochs have passed without an improvement; the best epoch's weights are the
ones saved. `d` keeps a loss that creeps towards zero on a small, easy
validation part (scikit-learn's wine: 14 rows, 1e-5 by epoch 30) from keeping
epoch after epoch while the held-out loss triples.
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
      best_epoch: The last epoch (from 1) that improved on the best before it; None
        before any finite loss.
      improved: Whether the latest epoch is that epoch.
      stop: Whether `patience` epochs have passed since it without an improvement.
    """

    best_epoch: Optional[int]
    improved: bool
    stop: bool


def decide(losses: Sequence[Optional[float]], patience: int,
           min_delta: float = 0.0) -> Decision:
    """The early-stopping decision after `len(losses)` epochs.

    Args:
      losses: Each epoch's loss on the validation part, from epoch 1 (None or NaN:
        not measured, never the best).
      patience: Epochs without an improvement before training stops.
      min_delta: How far below the best epoch's loss an epoch's must be to improve
        on it (the first finite loss always does).

    Returns:
      The best epoch so far, whether the latest is it, and whether to stop.
    """
    best, lowest = None, math.inf
    for epoch, loss in enumerate(losses, start=1):
        if loss is not None and math.isfinite(loss) and (best is None
                                                          or loss < lowest - min_delta):
            best, lowest = epoch, loss
    epochs = len(losses)
    return Decision(best, epochs > 0 and best == epochs, epochs - (best or 0) >= patience)


def no_improvement(min_delta: float, than: str = "it") -> str:
    """What the epochs after the best one lacked (`than`: the best, as the sentence names it)."""
    if not min_delta:
        return "no lower validation loss"
    return f"no validation loss more than {min_delta:g} below {than}"


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
      min_delta: How far below the best loss a later epoch's had to be to improve on it.
    """

    epoch: int
    epochs_run: int
    epochs_planned: int
    patience: Optional[int] = None
    stopped_early: bool = False
    validation_loss: Optional[float] = None
    min_delta: float = 0.0

    def _best(self) -> str:
        """The kept epoch's validation loss, as `describe` names it."""
        loss = "" if self.validation_loss is None else f", {self.validation_loss:.4f}"
        return f"the {'best' if self.min_delta else 'lowest'} validation loss{loss}"

    def _epochs_after(self) -> str:
        """The epochs run after the kept one."""
        after = self.epochs_run - self.epoch
        return "the epoch after it" if after == 1 else f"the {after} epochs after it"

    def describe(self) -> str:
        """Which epoch was kept and why, in one line."""
        if self.patience is None:
            return (f"kept the last epoch, {self.epoch} of {self.epochs_planned}: early "
                    "stopping is off")
        if self.stopped_early:
            return (f"kept epoch {self.epoch} ({self._best()}); stopped after epoch "
                    f"{self.epochs_run} of {self.epochs_planned}: {no_improvement(self.min_delta)} "
                    f"in {self._epochs_after()} (patience {self.patience})")
        if self.epoch == self.epochs_run:
            return f"kept the last epoch, {self.epoch} of {self.epochs_planned} ({self._best()})"
        return (f"kept epoch {self.epoch} of {self.epochs_run} ({self._best()}; "
                f"{no_improvement(self.min_delta)} in {self._epochs_after()})")

    def metric_values(self) -> Dict[str, float]:
        """The figures as the training step's metrics (numbers only, as KFP keeps them)."""
        values = {"kept_epoch": float(self.epoch), "epochs_run": float(self.epochs_run),
                  "epochs_planned": float(self.epochs_planned),
                  "stopped_early": float(self.stopped_early),
                  "early_stopping_patience": float(self.patience or 0),
                  "early_stopping_min_delta": float(self.min_delta)}
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
                   bool(metrics.get("stopped_early")), None if loss is None else float(loss),
                   float(metrics.get("early_stopping_min_delta", 0.0)))

    def summary(self) -> Dict[str, Any]:
        """The figures for a run's `summary.json`."""
        return {"kept_epoch": self.epoch, "epochs_run": self.epochs_run,
                "stopped_early": self.stopped_early, "early_stopping_patience": self.patience,
                "early_stopping_min_delta": self.min_delta,
                "kept_validation_loss": self.validation_loss, "kept_why": self.describe()}
