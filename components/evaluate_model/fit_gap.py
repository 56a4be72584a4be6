"""When training and held-out accuracy part: the model learnt its training examples, not the task.

A model at training accuracy 1.000 and held-out 0.699 has memorised what it
saw; its held-out figure is the one that counts, and the gap says what to
change. The rule is defined once here, for the evaluation's report and for
`kfdist run`'s console.
"""

from __future__ import annotations

from typing import Optional

#: Training accuracy above held-out accuracy by more than this is called out.
MAX_ACCURACY_GAP = 0.1


def accuracy_gap(training_accuracy: Optional[float],
                 held_out_accuracy: Optional[float]) -> Optional[str]:
    """One line saying that training and held-out accuracy part, or None when they do not.

    Args:
      training_accuracy: The last epoch's training accuracy (None: not recorded, e.g. by
        a user's program).
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
