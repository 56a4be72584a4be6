"""The per-epoch log line of a training replica: written by the replica, read by `kfdist run`.

    epoch 3/10: accuracy=0.9312 loss=0.2211 val_accuracy=0.9402 val_loss=0.2005 examples/s=8401 (0.2s)

The metrics are the epoch's `logs`, sorted by name: the training metrics and,
where the leader validated on the eval split, `val_loss` and `val_accuracy`.
The time and examples per second are the training steps', without the validation.

No TensorFlow here: the console that draws the epoch progress bar imports it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, Mapping, Optional

_LINE = re.compile(r"(?:^|\] )epoch (?P<epoch>\d+)/(?P<epochs>\d+): (?P<metrics>.*?)"
                   r"(?: \((?P<seconds>[\d.]+)s\))?$")
_METRIC = re.compile(r"(?P<name>[\w/]+)=(?P<value>-?[\d.]+(?:e-?\d+)?|nan|inf)")


@dataclasses.dataclass(frozen=True)
class EpochProgress:
    """One finished epoch, as its log line tells it.

    Attributes:
      epoch: The epoch just finished, from 1.
      epochs: Epochs the job trains in all.
      metrics: Metrics by name (`loss`, `accuracy`, ..., the eval split's
        `val_loss` and `val_accuracy` where validated, `examples/s`).
      seconds: The epoch's wall time, when the line has it.
    """

    epoch: int
    epochs: int
    metrics: Dict[str, float]
    seconds: Optional[float] = None


def format_epoch_line(epoch: int, epochs: int, metrics: Mapping[str, float],
                      examples_per_second: float, seconds: float) -> str:
    """The line a replica logs when epoch `epoch` (from 1) of `epochs` ends."""
    shown = " ".join(f"{k}={float(v):.4f}" for k, v in sorted(metrics.items()))
    return f"epoch {epoch}/{epochs}: {shown} examples/s={examples_per_second:.0f} ({seconds:.1f}s)"


def parse_epoch_line(line: str) -> Optional[EpochProgress]:
    """The `EpochProgress` of a line `format_epoch_line` wrote (a `[replica] ` prefix
    allowed), or None for any other line."""
    match = _LINE.search(line.rstrip())
    if match is None:
        return None
    metrics = {m["name"]: float(m["value"]) for m in _METRIC.finditer(match["metrics"])}
    seconds = match["seconds"]
    return EpochProgress(int(match["epoch"]), int(match["epochs"]), metrics,
                         float(seconds) if seconds else None)
