"""Per-column statistics of a table, collected while the shard step reads it.

`StatisticsCollector.observe` takes every batch of the scan pass (both
splits): rows, missing cells, minimum, maximum and sum of each numeric column,
the missing cells and the value counts of each string column (a missing cell
is no value: `categorical.present_counts`) and, when a reference is given, each
numeric column binned at the reference's histogram edges, so both sides of a
drift comparison are binned alike. A column's own histogram needs its minimum
and maximum first: `observe_histograms` takes the batches of the writing pass.
Statistics describe tables (`features` with columns); images get none.
"""

from __future__ import annotations

import collections
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from kfdist.components.common.dataset_spec import FEATURES_KEY, FeatureSpec
from kfdist.components.common.dataset_statistics import (
    CATEGORICAL, HISTOGRAM_BINS, MAX_VALUES, NUMERIC, ColumnStatistics, DatasetStatistics)
from kfdist.components.shard_dataset.categorical import present_counts
from kfdist.components.shard_dataset.source import ExampleBatch


def bin_counts(values: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Counts `values` (NaN left out) per bin of `edges`: `len(edges) + 1` counts, the first
    below `edges[0]`, the last above `edges[-1]`, the bins between closed on the left (the
    last one on both sides)."""
    edges = np.asarray(edges, np.float64)
    values = np.asarray(values, np.float64)
    values = values[~np.isnan(values)]
    index = np.searchsorted(edges, values, side="right")
    index[(values == edges[-1]) & (len(edges) > 1)] = len(edges) - 1
    return np.bincount(index, minlength=len(edges) + 1)


def histogram_edges(minimum: Optional[float], maximum: Optional[float]
                    ) -> Optional[Tuple[float, ...]]:
    """`HISTOGRAM_BINS` equal-width bins from `minimum` to `maximum` (None without values)."""
    if minimum is None:
        return None
    return tuple(float(v) for v in np.linspace(minimum, maximum, HISTOGRAM_BINS + 1))


def describes(feature: FeatureSpec) -> bool:
    """Whether a source's examples get statistics (a table's feature vector)."""
    return feature.key == FEATURES_KEY and len(feature.shape) == 1


def numeric_names(feature: FeatureSpec) -> Tuple[str, ...]:
    """The names of the numeric columns (`feature_<i>` for a vector without names)."""
    return tuple(feature.columns or (f"feature_{i}" for i in range(feature.shape[0])))


class StatisticsCollector:
    """Accumulates a table's statistics over its batches (see the module docstring).

    Args:
      feature: The source's feature (its numeric and string columns).
      reference_edges: Per numeric column, the reference's histogram edges to bin
        this data at as well.
    """

    def __init__(self, feature: FeatureSpec,
                 reference_edges: Optional[Mapping[str, Sequence[float]]] = None):
        self.numeric = numeric_names(feature)
        self.categorical = tuple(feature.categorical_columns or ())
        width = len(self.numeric)
        self.rows = 0
        self.missing = np.zeros(width, np.int64)
        self.total = np.zeros(width, np.float64)
        self.minimum = np.full(width, np.inf)
        self.maximum = np.full(width, -np.inf)
        self.values = [collections.Counter() for _ in self.categorical]
        self.reference_edges = {name: tuple(edges)
                                for name, edges in (reference_edges or {}).items()
                                if name in self.numeric and edges}
        self.at_reference = {name: np.zeros(len(edges) + 1, np.int64)
                             for name, edges in self.reference_edges.items()}
        self.own_counts: Dict[str, np.ndarray] = {}
        self._own_edges: Optional[Dict[int, Tuple[float, ...]]] = None  # once the scan is done

    def observe(self, batch: ExampleBatch) -> None:
        """Adds a batch of the scan pass."""
        if len(batch.labels) == 0:
            return
        self.rows += len(batch.labels)
        inputs = batch.inputs.astype(np.float64)
        present = ~np.isnan(inputs)
        self.missing += (~present).sum(axis=0)
        self.total += np.where(present, inputs, 0.0).sum(axis=0)
        self.minimum = np.minimum(self.minimum, np.where(present, inputs, np.inf).min(axis=0))
        self.maximum = np.maximum(self.maximum, np.where(present, inputs, -np.inf).max(axis=0))
        for name, edges in self.reference_edges.items():
            self.at_reference[name] += bin_counts(inputs[:, self.numeric.index(name)], edges)
        for column, counter in enumerate(self.values):
            counter.update(batch.categorical[:, column].tolist())

    def _range(self, j: int) -> Tuple[Optional[float], Optional[float]]:
        if self.minimum[j] > self.maximum[j]:
            return None, None
        return float(self.minimum[j]), float(self.maximum[j])

    def observe_histograms(self, batch: ExampleBatch) -> None:
        """Adds a batch of the writing pass (after every batch of the scan pass)."""
        if self._own_edges is None:  # the range is final: the edges are the same for every batch
            self._own_edges = {j: edges for j in range(len(self.numeric))
                               if (edges := histogram_edges(*self._range(j))) is not None}
        for j, edges in self._own_edges.items():
            name = self.numeric[j]
            self.own_counts[name] = self.own_counts.get(name, 0) + bin_counts(batch.inputs[:, j],
                                                                              edges)

    def binned_at_reference(self) -> Dict[str, Tuple[int, ...]]:
        """Per numeric column with reference edges: this data's counts at them."""
        return {name: tuple(int(v) for v in counts) for name, counts in self.at_reference.items()}

    def finish(self, identifiers: Sequence[str] = ()) -> DatasetStatistics:
        """The statistics, once both passes are done.

        Args:
          identifiers: The string columns that identify rows.
        """
        columns = []
        for j, name in enumerate(self.numeric):
            low, high = self._range(j)
            present = self.rows - int(self.missing[j])
            counts = self.own_counts.get(name)
            columns.append(ColumnStatistics(
                name=name, kind=NUMERIC, rows=self.rows, missing=int(self.missing[j]),
                minimum=low, maximum=high,
                mean=float(self.total[j] / present) if present else None,
                histogram_edges=histogram_edges(low, high),
                histogram_counts=None if counts is None else tuple(int(v) for v in counts)))
        for name, counter in zip(self.categorical, self.values):
            present = present_counts(counter)
            ranked = sorted(present.items(), key=lambda kv: (-kv[1], kv[0]))
            kept = dict(ranked[:MAX_VALUES])
            present_rows = sum(present.values())
            columns.append(ColumnStatistics(
                name=name, kind=CATEGORICAL, rows=self.rows, missing=self.rows - present_rows,
                distinct_values=len(present), value_counts=kept,
                other_count=present_rows - sum(kept.values()), identifier=name in identifiers))
        return DatasetStatistics(rows=self.rows, columns=tuple(columns))
