"""The blessing rule: the absolute threshold, and never worse than the served model.

TFX's Evaluator blesses a candidate that clears a value threshold *and* a
change threshold against the baseline (the model being served). kfdist's
rule, pure and in one place:

* the new model's held-out accuracy must reach `accuracy_threshold`;
* when a model is served under the same export base and name (the latest
  exported version, `common/serving_versions`), both are scored on the same
  held-out split and the new one must not be worse by more than
  `min_improvement` allows: `accuracy - served_accuracy >= min_improvement`.
  0 (the default) means "not worse"; 0.01 asks for a point more; -0.01
  tolerates a point less; -1 blesses on the threshold alone (the comparison is
  still reported);
* no served model: the threshold alone, and the reason says so;
* a served model that cannot be scored on this dataset (its serving
  signature takes other inputs) is named with what it takes and what the
  dataset holds, and not compared: the threshold alone decides, and the
  reason says the served model could not be compared. Refusing every model
  after a deliberate change of features would stop a pipeline for good;
  blessing on the threshold keeps it running and says so loudly;
* a served model that predicts other classes than the new one (a class
  gained, lost or spelled another way) is never replaced unasked: the new
  model is not blessed unless `allow_class_change` says a model with other
  classes may replace it, and then the threshold alone decides. Its clients
  read class ids and names; other classes under the same name would break
  them silently.

A regression (the label is a number, `decide_regression`) follows the same rule
with its error instead of accuracy, lower being better: its held-out RMSE must
not exceed `rmse_threshold` (by default the RMSE of predicting the train split's
mean label for every example: the model must beat the mean), and must be lower
than the served model's by the share `min_improvement` asks (0: not higher;
0.01: 1% lower; -1: the threshold alone). A served model that predicts classes
is one with other outputs, replaced only with `allow_class_change`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from kfdist.components.common.class_counts import listed
from kfdist.components.common.errors import require

if TYPE_CHECKING:  # the rule itself needs neither numpy nor the dataset's modules
    from kfdist.components.evaluate_model.slices import SliceMetrics

#: The default of `min_improvement`: the new model may not be worse than the served one.
MIN_IMPROVEMENT = 0.0
#: The default of `allow_class_change`: a model with other classes never replaces the served one.
ALLOW_CLASS_CHANGE = False
#: The default of `rmse_threshold`: 0, the RMSE of predicting the train split's mean label.
RMSE_THRESHOLD = 0.0
#: Accuracies are fractions of one split's examples; a change within this of the bound meets it.
_TOLERANCE = 1e-9


@dataclasses.dataclass(frozen=True)
class ServedModel:
    """The model being served, as the evaluation found it.

    Attributes:
      path: Its version directory, `<export_base>/<name>/<version>`.
      version: Its version number.
      accuracy: Its accuracy on the same held-out split; None when not compared.
      loss: Its mean cross-entropy there; None when not compared.
      slices: Its metrics on the same slices as the new model's.
      mismatch: Why it could not be compared (what it takes and what the
        dataset holds); None when it was.
      class_change: Whether the mismatch is that it predicts other classes than
        the new model (`class_change`), or classes where the new one predicts a number.
      rmse: A regression's: its RMSE on the same held-out split; None when not compared.
      mae: A regression's: its mean absolute error there.
    """

    path: str
    version: int
    accuracy: Optional[float] = None
    loss: Optional[float] = None
    slices: List[SliceMetrics] = dataclasses.field(default_factory=list)
    mismatch: Optional[str] = None
    class_change: bool = False
    rmse: Optional[float] = None
    mae: Optional[float] = None

    @property
    def compared(self) -> bool:
        """Whether it was scored on the held-out split."""
        return self.mismatch is None and (self.accuracy is not None or self.rmse is not None)


def check_min_improvement(min_improvement) -> None:
    """Checks `min_improvement` before any work is done.

    Raises:
      InvalidInputError: Naming the value and what would be valid.
    """
    require(isinstance(min_improvement, (int, float)) and not isinstance(min_improvement, bool)
            and -1.0 <= float(min_improvement) <= 1.0,
            f"min_improvement={min_improvement!r} is invalid; expected a number in [-1, 1]: how "
            "much more held-out accuracy than the served model's the new model needs (0: not "
            "worse; negative: a tolerance; -1: the threshold alone)")


def _listed(names: Sequence[str]) -> str:
    return f"[{listed(repr(n) for n in names)}]"


def class_change(served: Optional[Sequence[str]], new: Sequence[str]) -> Optional[str]:
    """How the served model's classes differ from the new model's, in one line; None when
    they are the same (or the served model's are not known).

    Args:
      served: The served model's class names, index = class id (None: not recorded).
      new: The new model's.
    """
    if served is None or list(served) == list(new):
        return None
    gained = [n for n in new if n not in served]
    lost = [n for n in served if n not in new]
    diff = "; ".join(part for part in (
        f"new: {_listed(gained)}" if gained else "", f"gone: {_listed(lost)}" if lost else "",
        "the same names in another order" if not gained and not lost else "") if part)
    return (f"it predicts {len(served)} classes {_listed(list(served))}; the new model "
            f"predicts {len(new)} ({diff})")


def fmt_pair(a: float, b: float) -> Tuple[str, str]:
    """Formats two numbers with 3 decimals, or more when 3 would make them look equal."""
    for digits in (3, 6, 9):
        sa, sb = f"{a:.{digits}f}", f"{b:.{digits}f}"
        if sa != sb or a == b:
            return sa, sb
    return repr(a), repr(b)


def decide(accuracy: float, threshold: float, *, served: Optional[ServedModel] = None,
           served_root: str = "", min_improvement: float = MIN_IMPROVEMENT,
           allow_class_change: bool) -> Tuple[bool, str]:
    """The blessing and its reason.

    Args:
      accuracy: The new model's held-out accuracy.
      threshold: The accuracy it must reach.
      served: The served model, compared or not; None when none is served.
      served_root: Where a served model was looked for (`<export_base>/<name>`);
        empty when no export base was given.
      min_improvement: How much more accuracy than the served model's is needed.
      allow_class_change: Whether a model with other classes than the served one's may
        replace it (on the threshold alone).

    Returns:
      `(blessed, reason)`, the reason one line a person reads.
    """
    passes = accuracy >= threshold
    sa, st = fmt_pair(accuracy, threshold)
    reason = f"accuracy {sa} {'≥' if passes else '<'} threshold {st}"
    if served is None:
        where = f"under {served_root}" if served_root else "(no export base given)"
        return passes, f"{reason}; no served model {where} to compare with"
    if served.class_change and not allow_class_change:
        return False, (f"{reason}; the served model {served.path} predicts other classes: "
                       f"{served.mismatch}; a model with other classes replaces it only with "
                       "allow_class_change=True")
    if served.class_change:
        return passes, (f"{reason}; the served model {served.path} predicts other classes "
                        f"({served.mismatch}), which allow_class_change allows")
    if not served.compared:
        return passes, (f"{reason}; the served model {served.path} could not be compared: "
                        f"{served.mismatch}")
    change = accuracy - served.accuracy
    better = change >= min_improvement - _TOLERANCE
    sn, ss = fmt_pair(accuracy, served.accuracy)
    against = (f"the served version {served.version} scores {ss} on the same examples "
               f"(change {change:+.3f}, min_improvement {min_improvement:+.3f})")
    if not passes:
        return False, f"{reason}; {against}"
    if not better:
        return False, f"{reason} but {against}: the new model is not good enough to replace it"
    return True, f"{reason} and {against}"


def check_rmse_threshold(rmse_threshold) -> None:
    """Checks `rmse_threshold` before any work is done.

    Raises:
      InvalidInputError: Naming the value and what would be valid.
    """
    require(isinstance(rmse_threshold, (int, float)) and not isinstance(rmse_threshold, bool)
            and float(rmse_threshold) >= 0.0,
            f"rmse_threshold={rmse_threshold!r} is invalid; expected a number ≥ 0: the highest "
            "held-out RMSE, in the label's units, a regression's model may have (0: the RMSE "
            "of predicting the train split's mean label)")


def decide_regression(rmse: float, threshold: float, *, served: Optional[ServedModel] = None,
                      served_root: str = "", min_improvement: float = MIN_IMPROVEMENT,
                      allow_class_change: bool, baseline: bool = False) -> Tuple[bool, str]:
    """A regression's blessing and its reason (see the module docstring).

    Args:
      rmse: The new model's held-out RMSE.
      threshold: The RMSE it must not exceed.
      served: The served model, compared or not; None when none is served.
      served_root: Where a served model was looked for; empty without an export base.
      min_improvement: The share by which its RMSE must fall below the served model's.
      allow_class_change: Whether a model predicting classes may be replaced.
      baseline: Whether `threshold` is the RMSE of predicting the train mean (the default).

    Returns:
      `(blessed, reason)`, the reason one line a person reads.
    """
    passes = rmse <= threshold
    sa, st = fmt_pair(rmse, threshold)
    what = " (predicting the train mean)" if baseline else ""
    reason = f"RMSE {sa} {'≤' if passes else '>'} threshold {st}{what}"
    if served is None:
        where = f"under {served_root}" if served_root else "(no export base given)"
        return passes, f"{reason}; no served model {where} to compare with"
    if served.class_change and not allow_class_change:
        return False, (f"{reason}; the served model {served.path} has other outputs: "
                       f"{served.mismatch}; it is replaced only with allow_class_change=True")
    if not served.compared or served.rmse is None:
        return passes, (f"{reason}; the served model {served.path} could not be compared: "
                        f"{served.mismatch}")
    change = 1.0 - rmse / served.rmse if served.rmse > 0 else (0.0 if rmse == 0 else -1.0)
    better = min_improvement <= -1.0 or change >= min_improvement - _TOLERANCE
    _, ss = fmt_pair(rmse, served.rmse)
    against = (f"the served version {served.version} has RMSE {ss} on the same examples "
               f"({change:+.1%} lower, min_improvement {min_improvement:+.3f})")
    if not passes:
        return False, f"{reason}; {against}"
    if not better:
        return False, f"{reason} but {against}: the new model is not good enough to replace it"
    return True, f"{reason} and {against}"
