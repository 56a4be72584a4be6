"""What a program's failure means, said in one line when kfdist knows it.

A program's replica that fails shows its last lines; some failures have a cause that those
lines do not say. Keras 3, TensorFlow's `tf.keras` since 2.16, fails `model.fit` under
MultiWorkerMirroredStrategy with `Attempt to convert a value (PerReplica ...)`: the fix is
tf-keras (Keras 2) selected with `TF_USE_LEGACY_KERAS=1`, in the program's image or
environment. Both `kfdist launch` and the `train_program` step add that line to the failure.
"""

from __future__ import annotations

import contextlib
import re
from typing import Callable, Iterator, Optional

from kfdist.components.common import value_folding
from kfdist.components.common.errors import TrainingFailedError

#: What Keras 3's `model.fit` raises under a multi-worker strategy.
KERAS3_SIGNATURE = "Attempt to convert a value (PerReplica"
#: The line that says what that failure is and how to fix it.
KERAS3_HINT = (
    "the program failed in Keras 3 (tf.keras since TensorFlow 2.16), whose model.fit does not "
    "run under MultiWorkerMirroredStrategy (the 'PerReplica' error above): install tf-keras in "
    "the program's image or environment and set TF_USE_LEGACY_KERAS=1 there before TensorFlow "
    "is imported (in the program, or with kfdist launch --env TF_USE_LEGACY_KERAS=1)")
#: A log line's source: its `[worker-1] ` label.
_LABEL = re.compile(r"^(\[[^\]\s]+\] )")


def hint_for(message: str) -> Optional[str]:
    """The line that explains a failure with this message, or None when kfdist knows none."""
    if KERAS3_SIGNATURE in message:
        return KERAS3_HINT
    return None


@contextlib.contextmanager
def explained() -> Iterator[None]:
    """Adds `hint_for`'s line, as the last, to a `TrainingFailedError` raised inside."""
    try:
        yield
    except TrainingFailedError as error:
        hint = hint_for(str(error))
        if hint is None or hint in str(error):
            raise
        raise TrainingFailedError(f"{error}\n{hint}") from error


class FoldingLog:
    """A log that folds the per-replica values an error prints whole into one line, per
    `[replica] ` label (`value_folding`), before passing each line on."""

    def __init__(self, log: Callable[[str], None]):
        self._log = log
        self._folder = value_folding.ValueFolder()

    def __call__(self, line: str) -> None:
        label = _LABEL.match(line)
        prefix = label.group(1) if label else ""
        for out in self._folder.feed(line[len(prefix):], prefix):
            self._log(prefix + out)

    def flush(self) -> None:
        """Passes on each value still folded (its stream ended within it) as its one line."""
        for prefix, line in self._folder.flush():
            self._log(prefix + line)
