"""Whether the model over-fits, read from its curves: the advice of the report and the console.

Held-out loss that falls, bottoms out and climbs again while training goes on
is over-fitting, however close the final accuracies are: the epoch where it
bottomed is the one to keep. With early stopping on, the run kept the epoch
with the lowest loss on its validation part, and the advice says how that
epoch fares (a warning when its held-out loss is itself past the rise); with it off, the last epoch was kept, and the advice says which
would have been better. Without such a rise, a final training accuracy far
above held-out accuracy still says the model memorised its examples, and a
held-out loss still falling at the last epoch says more epochs may help.

The rules are defined once here, for the evaluation's report and for
`kfdist run`'s console and summary.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Optional, Sequence

from kfdist.components.common.kept_epoch import SELECTION_LOSS, KeptEpoch

#: Training accuracy above held-out accuracy by more than this is called out.
MAX_ACCURACY_GAP = 0.1
#: A loss this much above its lowest (a share of it) by the last epoch is a rise.
MIN_LOSS_RISE = 0.2
#: Epochs a curve needs before it is read.
MIN_EPOCHS = 3
#: A held-out loss that fell by more than this share over the last `MIN_EPOCHS` epochs, to
#: its lowest at the last one, is still falling.
MIN_LATE_FALL = 0.05


@dataclasses.dataclass(frozen=True)
class FitAdvice:
    """What the curves say.

    Attributes:
      text: One line: what the curves show and what to change.
      warning: Whether the model kept is the worse for it (a warning), or the
        line only informs (early stopping already kept the better epoch).
    """

    text: str
    warning: bool


def _finite(curve: Sequence[Optional[float]]) -> list:
    return [(epoch, v) for epoch, v in enumerate(curve, start=1)
            if v is not None and math.isfinite(v)]


def _held_out_curve(history: Mapping[str, Sequence[Optional[float]]]):
    """The held-out loss per epoch (the eval split's), else the validation part's, and its name."""
    if _finite(history.get("val_loss") or []):
        return history["val_loss"], "held-out loss"
    return history.get(SELECTION_LOSS) or [], "validation loss"


def _rise(history, kept: Optional[KeptEpoch]) -> Optional[FitAdvice]:
    curve, name = _held_out_curve(history)
    points = _finite(curve)
    if len(points) < MIN_EPOCHS:
        return None
    low_epoch, low = min(points, key=lambda p: p[1])
    last_epoch, last = points[-1]
    if low_epoch == last_epoch or last <= low * (1 + MIN_LOSS_RISE):
        return None
    training = dict(_finite(history.get("loss") or []))
    fell = (f" while training loss fell to {training[last_epoch]:.4f}"
            if last_epoch in training and low_epoch in training
            and training[last_epoch] < training[low_epoch] else "")
    seen = (f"{name} was lowest at epoch {low_epoch} ({low:.4f}) and rose to {last:.4f} by "
            f"epoch {last_epoch}{fell}: the model over-fits after epoch {low_epoch}")
    if kept is not None and kept.patience is not None:
        at_kept = dict(points).get(kept.epoch)
        fares = f", {name} {at_kept:.4f}" if at_kept is not None else ""
        if at_kept is not None and at_kept > low * (1 + MIN_LOSS_RISE):
            return FitAdvice(f"{seen}; early stopping kept epoch {kept.epoch}{fares}, a "
                             "later one than the held-out loss would: a larger "
                             "validation_fraction (a steadier validation loss), a larger "
                             "early_stopping_min_delta, a lower learning rate or fewer epochs "
                             "would keep a better epoch",
                             warning=True)
        return FitAdvice(f"{seen}; early stopping kept epoch {kept.epoch}{fares}. A lower "
                         "learning rate, a smaller model or more data would let it learn "
                         "longer before it over-fits", warning=False)
    return FitAdvice(f"{seen}, yet the last epoch was kept; turn early stopping on "
                     f"(early_stopping_patience), or train {low_epoch} epochs", warning=True)


def fit_advice(history: Mapping[str, Sequence[Optional[float]]],
               training_accuracy: Optional[float], held_out_accuracy: Optional[float],
               kept: Optional[KeptEpoch] = None) -> Optional[FitAdvice]:
    """What the training curves and the final accuracies say about over-fitting, or None.

    Args:
      history: Per-epoch metric lists (`model_artifact.read_history`): `loss`, the
        held-out `val_loss`, the validation part's `selection_loss`; may be empty.
      training_accuracy: The kept epoch's training accuracy (None: not recorded, e.g.
        by a user's program).
      held_out_accuracy: Accuracy on the eval split.
      kept: Which epoch the run kept and why (None: not recorded).

    Returns:
      The advice: a rise of the held-out (or validation) loss after its lowest epoch;
      else a training accuracy more than `MAX_ACCURACY_GAP` above held-out; else a
      held-out loss still falling at the last epoch of a run that was not stopped
      early; else None.
    """
    rise = _rise(history, kept)
    if rise is not None:
        return rise
    gap = accuracy_gap(training_accuracy, held_out_accuracy)
    if gap is not None:
        return FitAdvice(gap, warning=True)
    return _still_falling(history, kept)


def accuracy_gap(training_accuracy: Optional[float],
                 held_out_accuracy: Optional[float]) -> Optional[str]:
    """One line saying that training and held-out accuracy part, or None when they do not.

    Args:
      training_accuracy: The kept epoch's training accuracy (None: not recorded).
      held_out_accuracy: Accuracy on the eval split.

    Returns:
      The line, when training accuracy exceeds held-out accuracy by more than
      `MAX_ACCURACY_GAP`; else None.
    """
    if training_accuracy is None or held_out_accuracy is None:
        return None
    if training_accuracy - held_out_accuracy <= MAX_ACCURACY_GAP:
        return None
    return (f"training accuracy {training_accuracy:.3f} but held-out {held_out_accuracy:.3f}: "
            f"the model fits its training examples far better than new ones (a gap over "
            f"{MAX_ACCURACY_GAP:.2f}, overfitting); fewer epochs, a smaller model, fewer "
            "one-hot columns or more data narrow it")


def _still_falling(history, kept: Optional[KeptEpoch]) -> Optional[FitAdvice]:
    curve, name = _held_out_curve(history)
    points = _finite(curve)
    if len(points) < MIN_EPOCHS or (kept is not None and kept.stopped_early):
        return None
    (_, before), (last_epoch, last) = points[-MIN_EPOCHS], points[-1]
    if last > min(v for _, v in points) or last >= before * (1 - MIN_LATE_FALL):
        return None
    return FitAdvice(f"{name} was still falling at the last epoch, {last_epoch} ({before:.4f} "
                     f"to {last:.4f} over its last {MIN_EPOCHS} epochs): more epochs may "
                     "help", warning=False)
