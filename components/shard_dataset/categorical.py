"""The string (categorical) columns of a table: their vocabularies, and identifiers left out.

Each string column becomes a one-hot block over its vocabulary: its values in
the train split, most frequent first, at most `MAX_VOCABULARY`; a missing cell
(`dataset_spec.MISSING_VALUES`) is no value, and counts neither in the
vocabulary nor as a row of the column below (`present_counts`). A column whose
values are (nearly) all distinct is no feature but an identifier (a row id, a
date, a name, free text): a model can only memorise the train rows by it, and
every eval row falls into its "unknown" slot. So a string column is left out
of the dataset when it has

* at least `IDENTIFIER_MIN_ROWS` train rows (fewer say little about it), and
* distinct values in at least `IDENTIFIER_SHARE` of them,

unless the user keeps it (`keep_columns`). The shard log names it and the
dataset's metadata records it (`dataset_spec.ExcludedColumn`). Numeric
columns are never judged so: a numeric id is standardised like any number
(one input whose weight cannot memorise rows); drop it with `exclude_columns`.
The local and the Beam runner decide with the same counts and this code.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable, Dict, Mapping, Sequence, Tuple

import numpy as np

from kfdist.components.common.dataset_spec import (
    FEATURES_KEY, IDENTIFIER, MISSING_VALUES, REQUESTED, ExcludedColumn, FeatureSpec)
from kfdist.components.common.errors import require
from kfdist.components.shard_dataset.source import ExampleBatch

#: Most values kept per categorical column (the most frequent in the train split).
MAX_VOCABULARY = 1_000
#: A string column with distinct values in this share of its train rows is an identifier...
IDENTIFIER_SHARE = 0.9
#: ... once the train split has this many rows.
IDENTIFIER_MIN_ROWS = 100


def is_identifier(distinct_values: int, train_rows: int) -> bool:
    """Whether a string column with `distinct_values` in `train_rows` identifies rows."""
    return train_rows >= IDENTIFIER_MIN_ROWS and distinct_values >= IDENTIFIER_SHARE * train_rows


def present_counts(counts: Mapping[str, int]) -> Dict[str, int]:
    """A string column's value counts without its missing cells (`MISSING_VALUES`)."""
    return {value: n for value, n in counts.items() if value not in MISSING_VALUES}


class VocabularyCounter:
    """Counts each categorical column's values over the train split."""

    def __init__(self, num_columns: int):
        self.counts = [collections.Counter() for _ in range(num_columns)]

    def update(self, categorical: np.ndarray) -> None:
        """Adds a block of raw values `[B, num_columns]`."""
        for column, counter in enumerate(self.counts):
            counter.update(categorical[:, column].tolist())

    def identifiers(self, columns: Sequence[str], keep: Sequence[str] = ()
                    ) -> Tuple[ExcludedColumn, ...]:
        """The columns that identify rows (`is_identifier`) but those in `keep`, in order.

        Args:
          columns: The names of the counted columns, in order.
          keep: Columns to keep whatever their values.
        """
        out = []
        for name, counter in zip(columns, self.counts):
            present = present_counts(counter)
            rows = sum(present.values())
            if name not in keep and is_identifier(len(present), rows):
                out.append(ExcludedColumn(name=name, reason=IDENTIFIER,
                                          distinct_values=len(present), train_rows=rows))
        return tuple(out)

    def vocabularies(self, columns: Sequence[str], log: Callable[[str], None],
                     skip: Sequence[str] = ()) -> Tuple[Tuple[str, ...], ...]:
        """Each column's values but those of `skip`, most frequent first (ties by value), at
        most `MAX_VOCABULARY`; a missing cell is no value."""
        out = []
        for name, counter in zip(columns, self.counts):
            if name in skip:
                continue
            ranked = sorted(present_counts(counter).items(), key=lambda kv: (-kv[1], kv[0]))
            if len(ranked) > MAX_VOCABULARY:
                log(f"column {name!r} has {len(ranked):,} distinct values in the train split; "
                    f"keeping the {MAX_VOCABULARY:,} most frequent, the rest count as unknown")
            out.append(tuple(value for value, _ in ranked[:MAX_VOCABULARY]))
        return tuple(out)


def without_columns(feature: FeatureSpec, names: Sequence[str]) -> FeatureSpec:
    """`feature` without the categorical columns `names` (None when none is left)."""
    kept = tuple(c for c in feature.categorical_columns or () if c not in names)
    return dataclasses.replace(feature, categorical_columns=kept or None)


def drop_strings(batch: ExampleBatch, keep: Sequence[int]) -> ExampleBatch:
    """`batch` with only the categorical columns at positions `keep` (None when none)."""
    if batch.categorical is None:
        return batch
    strings = batch.categorical[:, list(keep)] if keep else None
    return dataclasses.replace(batch, categorical=strings)


def kept_positions(feature: FeatureSpec, names: Sequence[str]) -> Tuple[int, ...]:
    """Positions of `feature`'s categorical columns that are not in `names`."""
    return tuple(i for i, c in enumerate(feature.categorical_columns or ()) if c not in names)


def check_kept(feature: FeatureSpec, keep_columns: Sequence[str]) -> None:
    """Checks that `keep_columns` are feature columns of the source.

    Raises:
      InvalidInputError: Naming an unknown column and the valid ones.
    """
    valid = list(feature.columns or ()) + list(feature.categorical_columns or ())
    for name in keep_columns:
        require(name in valid, f"keep_columns names {name!r}, which is not a feature column of "
                               f"the source; its feature columns are {valid}")


def report_identifiers(feature: FeatureSpec, identifiers: Sequence[ExcludedColumn],
                       log: Callable[[str], None]) -> None:
    """Logs each identifier column left out of a table.

    Raises:
      InvalidInputError: If no feature column is left.
    """
    require(feature.key != FEATURES_KEY or feature.shape[0] > 0
            or len(feature.categorical_columns or ()) > len(identifiers),
            "no feature column is left: " + "; ".join(c.describe() for c in identifiers)
            + ". Keep one with keep_columns (--keep-columns), or add feature columns")
    for column in identifiers:
        log(column.describe())


def requested(exclude_columns: Sequence[str]) -> Tuple[ExcludedColumn, ...]:
    """The columns a user left out (`exclude_columns`), as recorded in the metadata."""
    return tuple(ExcludedColumn(name=name, reason=REQUESTED) for name in exclude_columns)
