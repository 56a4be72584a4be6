"""New data against a reference: schema anomalies and distribution drift, per column.

The reference is the dataset the served model was trained on, or one the user
names (`reference`). Both are described by `dataset_statistics`.

Anomalies (the shard step fails on them unless `allow_anomalies`):

* a column the reference has is missing, or a column is new;
* a column's kind changed (numeric to string values, or back);
* a string column holds a value the reference never had (columns that
  identify rows aside);
* the share of missing cells of a column rose by more than `MISSING_SHARE_JUMP`.
* the label holds a class the reference never had, or lacks one it had
  (`label_check`).

Drift (a warning): the L-infinity distance between a string column's value
distributions (the largest difference of a value's share, as TensorFlow Data
Validation measures it), above `CATEGORICAL_DRIFT_THRESHOLD` by default; the
Jensen-Shannon divergence (base 2: 0 for the same distribution, 1 for disjoint
ones) between a numeric column's histograms, both binned at the reference's
edges with a bin each for values below and above them, above
`NUMERIC_DRIFT_THRESHOLD` by default. Missing cells count in neither
distribution (their share has its own rule).

Why 0.1 for Jensen-Shannon: on the Palmer penguins table split by year (2009
against 2007-2008), the measurements that did not change stay at 0.01-0.05
with 10 bins and about a hundred rows, while a change of unit (grams to
kilograms) or a column past the reference's range (the year) reaches 1.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from kfdist.components.common.class_counts import listed
from kfdist.components.common.dataset_statistics import (
    CATEGORICAL, NUMERIC, ColumnStatistics, DatasetStatistics)
from kfdist.components.common.errors import KfdistError, require
from kfdist.components.shard_dataset.csv_columns import MISSING_VALUES

#: L-infinity distance between string value distributions above which a column drifted (TFDV's
#: customary threshold).
CATEGORICAL_DRIFT_THRESHOLD = 0.1
#: Jensen-Shannon divergence (base 2) between numeric histograms above which a column drifted.
NUMERIC_DRIFT_THRESHOLD = 0.1
#: A rise of a column's share of missing cells above this is an anomaly.
MISSING_SHARE_JUMP = 0.1
#: Unseen values a message names (the rest are counted).
NAMED_VALUES = 5
L_INFINITY, JENSEN_SHANNON = "L-infinity", "Jensen-Shannon"


class DataAnomalyError(KfdistError, ValueError):
    """The new data breaks the reference's schema; the message has one line per anomaly.

    Args:
      message: What broke the schema.
      page: The data check's HTML page (the anomalies, the drift and the data's statistics),
        for the step to keep although it writes no dataset; None: none was rendered.
    """

    def __init__(self, message: str, page: Optional[str] = None):
        super().__init__(message)
        self.page = page


@dataclasses.dataclass(frozen=True)
class Anomaly:
    """A break with the reference's schema.

    Attributes:
      column: The column.
      kind: `missing column`, `new column`, `kind changed`, `unseen values`,
        `missing share`, or for the label `new class`, `missing class` or `task changed`
        (`label_check`).
      message: One line saying what changed.
    """

    column: str
    kind: str
    message: str


@dataclasses.dataclass(frozen=True)
class Drift:
    """How far a column's distribution moved from the reference's.

    Attributes:
      column: The column.
      measure: `L-infinity` (string columns) or `Jensen-Shannon` (numeric).
      value: The distance.
      threshold: Above it, the column drifted.
    """

    column: str
    measure: str
    value: float
    threshold: float

    @property
    def drifted(self) -> bool:
        """Whether the distance is above the threshold."""
        return self.value > self.threshold

    def describe(self) -> str:
        """One line: the column, the measure and whether it drifted."""
        verdict = "above" if self.drifted else "within"
        return (f"column {self.column!r}: {self.measure} {self.value:.3f} "
                f"({verdict} the threshold {self.threshold:g})")


@dataclasses.dataclass(frozen=True)
class ValidationResult:
    """The new data against its reference.

    Attributes:
      reference: What the reference is (the served version's path, a dataset).
      anomalies: Breaks with the reference's schema.
      drifts: Per compared column, its distance to the reference.
      notes: Columns not compared, and why.
    """

    reference: str
    anomalies: Tuple[Anomaly, ...] = ()
    drifts: Tuple[Drift, ...] = ()
    notes: Tuple[str, ...] = ()

    @property
    def drifted(self) -> Tuple[Drift, ...]:
        """The drifts above their threshold."""
        return tuple(d for d in self.drifts if d.drifted)


def l_infinity(reference: Mapping[str, int], current: Mapping[str, int]) -> float:
    """The largest difference between a value's share in two count tables (0 when either
    table is empty)."""
    ref_total, cur_total = sum(reference.values()), sum(current.values())
    if not ref_total or not cur_total:
        return 0.0
    return max(abs(reference.get(v, 0) / ref_total - current.get(v, 0) / cur_total)
               for v in set(reference) | set(current))


def jensen_shannon(reference: Sequence[int], current: Sequence[int]) -> float:
    """The Jensen-Shannon divergence, base 2, of two histograms over the same bins (0 when
    either is empty)."""
    from scipy.spatial import distance  # SciPy comes with scikit-learn

    p, q = np.asarray(reference, np.float64), np.asarray(current, np.float64)
    if not p.sum() or not q.sum():
        return 0.0
    return float(distance.jensenshannon(p, q, base=2) ** 2)


def check_thresholds(categorical: float, numeric: float) -> None:
    """Raises `InvalidInputError` unless both drift thresholds are in [0, 1]."""
    for name, value in (("categorical_drift_threshold", categorical),
                        ("numeric_drift_threshold", numeric)):
        require(isinstance(value, (int, float)) and 0 <= value <= 1,
                f"{name}={value!r} is invalid; expected a number from 0 to 1")


def _present(column: ColumnStatistics) -> Dict[str, int]:
    return {v: n for v, n in (column.value_counts or {}).items() if v not in MISSING_VALUES}


def _unseen(ref: ColumnStatistics, cur: ColumnStatistics) -> Optional[Anomaly]:
    if ref.identifier or cur.identifier or ref.other_count:
        return None  # identifiers hold new values by nature; a truncated vocabulary cannot tell
    unseen = sorted(((v, n) for v, n in _present(cur).items() if v not in (ref.value_counts or {})),
                    key=lambda vn: (-vn[1], vn[0]))
    if not unseen:
        return None
    rows = sum(n for _, n in unseen)
    named = listed((f"{v!r} ({n} rows)" for v, n in unseen), NAMED_VALUES)
    return Anomaly(cur.name, "unseen values",
                   f"column {cur.name!r}: {len(unseen)} value(s) the reference never had, in "
                   f"{rows} of {cur.rows} rows: {named}")


def _column_anomalies(ref: ColumnStatistics, cur: ColumnStatistics) -> List[Anomaly]:
    if ref.kind != cur.kind:
        held = {NUMERIC: "numbers", CATEGORICAL: "strings"}
        return [Anomaly(cur.name, "kind changed",
                        f"column {cur.name!r} was {ref.kind} and is now {cur.kind} (it holds "
                        f"{held[cur.kind]})")]
    out = []
    if cur.missing_share - ref.missing_share > MISSING_SHARE_JUMP:
        out.append(Anomaly(cur.name, "missing share",
                           f"column {cur.name!r}: {cur.missing_share:.0%} of its cells are "
                           f"missing, {ref.missing_share:.0%} in the reference (a rise above "
                           f"{MISSING_SHARE_JUMP:.0%})"))
    if cur.kind == CATEGORICAL:
        unseen = _unseen(ref, cur)
        if unseen is not None:
            out.append(unseen)
    return out


def _drift(ref: ColumnStatistics, cur: ColumnStatistics, binned: Mapping[str, Sequence[int]],
           categorical_threshold: float, numeric_threshold: float) -> Optional[Drift]:
    if cur.kind == CATEGORICAL:
        if ref.identifier or cur.identifier:
            return None
        return Drift(cur.name, L_INFINITY, l_infinity(_present(ref), _present(cur)),
                     categorical_threshold)
    if ref.histogram_counts is None or cur.name not in binned:
        return None
    return Drift(cur.name, JENSEN_SHANNON, jensen_shannon(ref.histogram_counts, binned[cur.name]),
                 numeric_threshold)


def compare(reference: DatasetStatistics, current: DatasetStatistics, *, reference_name: str,
            binned_at_reference: Mapping[str, Sequence[int]],
            excluded: Sequence[str] = (), reference_excluded: Sequence[str] = (),
            categorical_threshold: float = CATEGORICAL_DRIFT_THRESHOLD,
            numeric_threshold: float = NUMERIC_DRIFT_THRESHOLD) -> ValidationResult:
    """Compares new data's statistics with the reference's.

    Args:
      reference: The reference's statistics.
      current: The new data's.
      reference_name: What the reference is, for messages.
      binned_at_reference: Per numeric column, the new data's histogram at the
        reference's edges (`StatisticsCollector.binned_at_reference`).
      excluded: Columns the user left out of the new data (not read: not missing).
      reference_excluded: Columns the user left out of the reference (not new).
      categorical_threshold: The L-infinity distance above which a string column drifted.
      numeric_threshold: The Jensen-Shannon divergence above which a numeric column drifted.
    """
    ref_columns, cur_columns = reference.by_name(), current.by_name()
    anomalies: List[Anomaly] = []
    drifts: List[Drift] = []
    notes: List[str] = []
    for name in ref_columns:
        if name in cur_columns:
            continue
        if name in excluded:
            notes.append(f"column {name!r}: not compared (excluded as requested)")
        else:
            anomalies.append(Anomaly(name, "missing column", f"column {name!r} is missing (the "
                                     f"reference has it, {ref_columns[name].kind})"))
    for name, cur in cur_columns.items():
        ref = ref_columns.get(name)
        if ref is None:
            if name in reference_excluded:
                notes.append(f"column {name!r}: not compared (excluded from the reference)")
            else:
                anomalies.append(Anomaly(name, "new column", f"column {name!r} is new ({cur.kind}; "
                                         "the reference has no such column)"))
            continue
        found = _column_anomalies(ref, cur)
        anomalies += found
        if any(a.kind == "kind changed" for a in found):
            continue
        drift = _drift(ref, cur, binned_at_reference, categorical_threshold, numeric_threshold)
        if drift is None:
            why = "it identifies rows" if cur.kind == CATEGORICAL else "the reference has no value"
            notes.append(f"column {name!r}: distribution not compared ({why})")
        else:
            drifts.append(drift)
    return ValidationResult(reference=reference_name, anomalies=tuple(anomalies),
                            drifts=tuple(drifts), notes=tuple(notes))
