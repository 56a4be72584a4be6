"""Metrics per slice of the eval split: the examples that share a column's value.

TFMA's `SlicingSpec(feature_keys=[column])` in kfdist's terms: the eval
examples of a table are grouped by the value of each column named in
`slice_columns`, and each group (a slice) gets its examples, accuracy and
loss from the same predictions as the whole split. A model that is good on
average but poor on one island, one region or one year shows it before it is
exported.

* A string column: one slice per value, as the source held it (an empty
  value is `(empty)`), the largest slices first.
* A numeric column: one slice per value when the eval split holds at most
  `MAX_VALUE_SLICES` distinct values (a year, a count); else `NUMERIC_BINS`
  bins between its quantiles, `[low, high)` (the last one closed). Missing
  values (NaN) are a slice of their own, `(missing)`.

The columns are read from the eval shards in shard order, the order of the
predictions, without TensorFlow; the labels read with them must equal the
predictions' labels.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from kfdist.components.common import dataset_spec as ds
from kfdist.components.common import eval_predictions as ep
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.evaluate_model.eval_columns import (  # noqa: F401  (part of this API)
    read_columns, read_shards)

#: A numeric column with at most this many distinct eval values gets a slice per value...
MAX_VALUE_SLICES = 10
#: ... else this many bins between its quantiles.
NUMERIC_BINS = 5
MISSING, EMPTY = "(missing)", "(empty)"
#: Slices per column in the step's `metrics` (report order: the largest string values first).
METRIC_SLICES = 10
#: Slices with fewer eval examples are left out of the lowest-accuracy headline (the report's
#: and `kfdist run`'s): one row at 0.0000 is noise, not a weak spot.
MIN_SLICE_EXAMPLES = 30


@dataclasses.dataclass(frozen=True)
class SliceMetrics:
    """The metrics of one slice of the eval split.

    Attributes:
      column: The column sliced by.
      value: The slice: a value of the column, `(missing)`, `(empty)` or a bin `[low, high)`.
      examples: Eval examples in the slice.
      accuracy: Their accuracy (NaN for a regression's).
      loss: Their mean cross-entropy, as the whole split's loss is computed; for a
        regression their mean squared error.
    """

    column: str
    value: str
    examples: int
    accuracy: float
    loss: float

    @property
    def rmse(self) -> float:
        """A regression slice's root mean squared error."""
        return math.sqrt(self.loss)

    @property
    def key(self) -> str:
        """`column=value`, e.g. `island=Biscoe` (the metric names' suffix)."""
        return f"{self.column}={self.value}"


def check_slice_columns_form(slice_columns) -> None:
    """Checks that `slice_columns` is a list of distinct, non-empty column names.

    Raises:
      InvalidInputError: Naming the bad value.
    """
    require(isinstance(slice_columns, (list, tuple))
            and all(isinstance(c, str) and c.strip() for c in slice_columns),
            f"slice_columns={slice_columns!r} is invalid; expected a list of column names, "
            "e.g. [\"island\"] (empty: no slices)")
    repeated = sorted(c for c, n in collections.Counter(slice_columns).items() if n > 1)
    require(not repeated, f"slice_columns names {repeated} more than once")


def check_slice_columns(slice_columns: Sequence[str], feature: ds.FeatureSpec,
                        excluded: Sequence[ds.ExcludedColumn] = (),
                        label_column: Optional[str] = None) -> None:
    """Checks that each slice column is a column of the dataset (numeric or string).

    Args:
      slice_columns: The columns to slice by.
      feature: The dataset's (or the source's) feature spec.
      excluded: The source's columns left out of the dataset, and why.
      label_column: The label's column, when known.

    Raises:
      InvalidInputError: Naming the column and the valid ones.
    """
    check_slice_columns_form(slice_columns)
    if not slice_columns:
        return
    require(feature.key == ds.FEATURES_KEY,
            f"slice_columns={list(slice_columns)}: the examples are images, which have no "
            "columns to slice by; slices apply to tables (CSV or numeric TFRecord sources)")
    valid = list(feature.columns or ()) + list(feature.categorical_columns or ())
    left_out = {c.name: c for c in excluded}
    for name in slice_columns:
        require(name != label_column,
                f"slice_columns names {name!r}, the label; the report's per-class table "
                "already breaks the metrics down by class. Slice by a feature column: "
                f"{valid}")
        if name in left_out:
            raise InvalidInputError(f"slice_columns names {name!r}, which is not in the "
                                    f"dataset: {left_out[name].describe()}")
        require(name in valid, f"slice_columns names {name!r}, which is not a column of the "
                               f"dataset; its columns are {valid}")


def _number(value: float) -> str:
    return f"{float(value):.6g}"


def _groups(values: np.ndarray) -> Tuple[List[str], np.ndarray]:
    """The slices of one column's values: their names, in report order, and each example's
    slice (an index into the names)."""
    if values.dtype == object:
        names, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
        order = sorted(range(len(names)), key=lambda i: (-counts[i], names[i]))
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return [str(names[i]) or EMPTY for i in order], rank[inverse]
    values = values.astype(np.float64)
    missing = np.isnan(values)
    present = values[~missing]
    distinct = np.unique(present)
    if len(distinct) <= MAX_VALUE_SLICES:
        names = [_number(v) for v in distinct]
        index = np.searchsorted(distinct, np.where(missing, distinct[0] if len(distinct) else 0,
                                                   values))
    else:
        edges = np.unique(np.quantile(present, np.linspace(0.0, 1.0, NUMERIC_BINS + 1)))
        bins = len(edges) - 1
        names = [f"[{_number(edges[i])}, {_number(edges[i + 1])}" + (")" if i < bins - 1 else "]")
                 for i in range(bins)]
        index = np.clip(np.searchsorted(edges, np.where(missing, edges[0], values),
                                        side="right") - 1, 0, bins - 1)
    if missing.any():
        names.append(MISSING)
        index = np.where(missing, len(names) - 1, index)
    return names, index.astype(np.int64)


def compute(values: Dict[str, np.ndarray], scored: ep.EvalPredictions) -> List[SliceMetrics]:
    """The metrics of every slice of every column.

    Args:
      values: Per column, its value for each eval example (in the predictions' order).
      scored: The predictions on the eval split.

    Returns:
      Per column in the order given, its slices in report order (strings: the
      largest first; numbers: by value, `(missing)` last).

    Raises:
      InvalidInputError: When a column holds another number of values than there are predictions.
    """
    correct = (np.full(len(scored.labels), np.nan) if scored.is_regression
               else (scored.predicted == scored.labels).astype(np.float64))
    losses = scored.losses()
    out = []
    for column, column_values in values.items():
        require(len(column_values) == len(correct),
                f"column {column!r} has {len(column_values)} eval values but there are "
                f"{len(correct)} predictions; the dataset is incomplete or corrupted")
        names, index = _groups(np.asarray(column_values))
        counts = np.bincount(index, minlength=len(names))
        right = np.bincount(index, weights=correct, minlength=len(names))
        lost = np.bincount(index, weights=losses, minlength=len(names))
        out += [SliceMetrics(column=column, value=name, examples=int(counts[i]),
                             accuracy=float(right[i] / counts[i]), loss=float(lost[i] / counts[i]))
                for i, name in enumerate(names) if counts[i]]
    return out


def slice_eval_split(meta: ds.DatasetMetadata, dataset_dir: str, columns: Sequence[str],
                     scored: ep.EvalPredictions) -> List[SliceMetrics]:
    """Reads the columns of the eval split and computes their slices' metrics.

    Raises:
      InvalidInputError: When a column is not in the dataset, or the split's labels are not
        the ones the predictions were made for.
    """
    check_slice_columns(columns, meta.feature, meta.excluded_columns or ())
    if not columns:
        return []
    values, labels = read_columns(meta, dataset_dir, columns)
    require(len(labels) == len(scored.labels) and np.array_equal(labels, scored.labels),
            f"the eval split of {dataset_dir!r} holds {len(labels)} examples whose labels are not "
            f"those of the {len(scored.labels)} predictions; the dataset changed since it was "
            "scored")
    return compute(values, scored)


def lowest(slices: Sequence[SliceMetrics], count: int,
           min_examples: int = MIN_SLICE_EXAMPLES) -> List[SliceMetrics]:
    """The `count` slices of lowest accuracy (then the largest first) among those of at least
    `min_examples` eval examples."""
    big = [s for s in slices if s.examples >= min_examples]
    return sorted(big, key=lambda s: (s.accuracy, -s.examples, s.key))[:count]


def metric_values(slices: Sequence[SliceMetrics], regression: bool = False) -> Dict[str, float]:
    """`accuracy[column=value]` (a regression's: `rmse[column=value]`) and
    `eval_examples[column=value]` of each column's first `METRIC_SLICES` slices, for the
    step's `metrics`."""
    shown = collections.Counter()
    out = {}
    for s in slices:
        shown[s.column] += 1
        if shown[s.column] <= METRIC_SLICES:
            if regression:
                out[f"rmse[{s.key}]"] = s.rmse
            else:
                out[f"accuracy[{s.key}]"] = s.accuracy
            out[f"eval_examples[{s.key}]"] = s.examples
    return out


def from_metric_values(metadata: Dict[str, float]) -> Dict[str, Dict[str, float]]:
    """The slices in a `metrics` artifact's metadata (`metric_values`), by `column=value`:
    `{"accuracy": ..., "examples": ...}` each (a regression's: `rmse` for `accuracy`)."""
    out = collections.defaultdict(dict)
    for name, value in metadata.items():
        for metric, field in (("accuracy", "accuracy"), ("rmse", "rmse"),
                              ("eval_examples", "examples")):
            if name.startswith(f"{metric}[") and name.endswith("]"):
                out[name[len(metric) + 1:-1]][field] = int(value) if field == "examples" else value
    return dict(out)
