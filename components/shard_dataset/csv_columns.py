"""What each column of a CSV source holds: numbers, strings (categories) or the label.

One pass over every file, before anything is written, decides each feature
column's kind: `numeric` when every value is a number or missing, `categorical`
when no value is a number. A column holding both is refused, naming a value
of each kind and its line, since a guess would silently turn numbers into
categories or drop strings. Missing values (`MISSING_VALUES`) are allowed in
every column but the label: in a numeric column they become NaN, and the
recorded preprocessing puts the train split's mean in their place; in a
categorical column they stay missing, out of its vocabulary (`dataset_spec`); a
row whose label is missing, empty or `NA` alike, is refused (`missing_label`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

import numpy as np

from kfdist.components.common.dataset_spec import MISSING_VALUES
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.shard_dataset.source import MAX_NUM_CLASSES

NUMERIC, CATEGORICAL = "numeric", "categorical"


def is_number(text: str) -> bool:
    """Whether a cell holds a number (missing values do not count)."""
    if text in MISSING_VALUES:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclasses.dataclass
class _ColumnSeen:
    """The first number and the first string seen in a column, as `(where, value)` (`where`:
    "line N of 'file.csv'"), and the
    distinct values already classified (up to `MAX_REMEMBERED`)."""

    number: Optional[Tuple[str, str]] = None
    string: Optional[Tuple[str, str]] = None
    classified: Set[str] = dataclasses.field(default_factory=set)


#: Distinct values remembered per column, so a categorical column's values are classified once.
MAX_REMEMBERED = 100_000


@dataclasses.dataclass(frozen=True)
class ColumnProfile:
    """The kinds of a CSV source's columns.

    Attributes:
      numeric: Numeric feature columns, in file order.
      categorical: String feature columns, in file order.
      labels: The label column's distinct (stripped) values, sorted (their classes:
        `label_values`).
    """

    numeric: Tuple[str, ...]
    categorical: Tuple[str, ...]
    labels: Tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class ColumnLayout:
    """Where the label, numeric and categorical values of a row are, and what a label
    becomes: a class id (int64), or for a regression its number (float64)."""

    columns: Tuple[str, ...]
    label_index: int
    numeric_index: List[int]
    categorical_index: List[int]
    label_to_id: Callable[[str], Union[int, float]]
    label_dtype: type = np.int64


def _all_numbers(cells: List[str]) -> bool:
    """Whether every non-missing cell is a number (one vectorised parse for the common case)."""
    try:
        np.asarray([c for c in cells if c not in MISSING_VALUES], dtype=np.float64)
    except ValueError:
        return False
    return True


def _observe(seen: List[_ColumnSeen], feature_index: Sequence[int], path: str, first_line: int,
             rows: List[List[str]]) -> None:
    for i, column in zip(feature_index, seen):
        if column.number is not None and column.string is not None:
            continue
        cells = [row[i].strip() for row in rows]
        if column.string is None and _all_numbers(cells):  # the common case: one parse
            present = [k for k, c in enumerate(cells) if c not in MISSING_VALUES]
            if column.number is None and present:
                column.number = (where(path, first_line + present[0]), cells[present[0]])
            continue
        new = set(cells) - column.classified
        if len(column.classified) < MAX_REMEMBERED:
            column.classified |= new
        numbers = {c for c in new if is_number(c)}
        strings = {c for c in new if c not in MISSING_VALUES and c not in numbers}
        for found, attr in ((numbers, "number"), (strings, "string")):
            if found and getattr(column, attr) is None:
                first = min(k for k, c in enumerate(cells) if c in found)
                setattr(column, attr, (where(path, first_line + first), cells[first]))


def where(path: str, line: int) -> str:
    """How a profile names a value's place: `line N of 'file.csv'`."""
    return f"line {line} of {os.path.basename(path)!r}"


class ProfileState:
    """What reading the rows has taught so far: each feature column's first number and first
    string, the label values and the number of rows.

    Args:
      columns: The header.
      label_column: The label's column.
      exclude_columns: Columns not read (neither label nor feature).
    """

    def __init__(self, columns: Tuple[str, ...], label_column: str,
                 exclude_columns: Sequence[str] = ()):
        self.columns = columns
        self.label_column = label_column
        self.label_index = columns.index(label_column)
        self.feature_index = [i for i in range(len(columns))
                              if i != self.label_index and columns[i] not in exclude_columns]
        self.seen = [_ColumnSeen() for _ in self.feature_index]
        self.labels: Set[str] = set()
        self.num_rows = 0

    def observe_rows(self, path: str, first_line: int, rows: List[List[str]]) -> None:
        """Adds a block of rows on consecutive lines, read with the `csv` module.

        Raises:
          InvalidInputError: On a missing label or too many distinct labels.
        """
        _check_labels_present(path, first_line, rows, self.label_index, self.label_column)
        self.labels.update(row[self.label_index].strip() for row in rows)
        self.num_rows += len(rows)
        require(len(self.labels) <= MAX_NUM_CLASSES,
                f"label column {self.label_column!r} has over {MAX_NUM_CLASSES} distinct "
                "values; is it really the class label?")
        _observe(self.seen, self.feature_index, path, first_line, rows)

    def add_file(self, labels: Set[str], num_rows: int, numbers: Dict[int, Tuple[str, str]],
                 strings: Dict[int, Tuple[str, str]]) -> None:
        """Adds what another reader learned from a whole file (read after what came before).

        Args:
          labels: The file's distinct (stripped) label values.
          num_rows: Its rows.
          numbers: Per feature position (index into `feature_index`), the file's first
            number as `(where, value)`; `strings` the same for strings.
        """
        self.labels |= labels
        self.num_rows += num_rows
        for k, column in enumerate(self.seen):
            if column.number is None and k in numbers:
                column.number = numbers[k]
            if column.string is None and k in strings:
                column.string = strings[k]

    def result(self, paths: Sequence[str]) -> ColumnProfile:
        """The profile of everything read.

        Raises:
          InvalidInputError: On a column with both numbers and strings, a column without any
            value or no rows.
        """
        require(self.num_rows > 0, f"CSV files {list(paths)} have a header but no rows")
        kinds = [_kind(self.columns[i], column, paths)
                 for i, column in zip(self.feature_index, self.seen)]
        names = [self.columns[i] for i in self.feature_index]
        return ColumnProfile(
            numeric=tuple(c for c, k in zip(names, kinds) if k == NUMERIC),
            categorical=tuple(c for c, k in zip(names, kinds) if k == CATEGORICAL),
            labels=tuple(sorted(self.labels)))


def profile_columns(paths: Sequence[str], columns: Tuple[str, ...], label_column: str,
                    row_blocks, read_file=None, exclude_columns: Sequence[str] = ()
                    ) -> ColumnProfile:
    """Reads every row once: the kind of every feature column and the label values.

    Args:
      paths: The CSV files.
      columns: Their header.
      label_column: The label's column.
      row_blocks: `row_blocks(path, num_columns)` yields `(first line, rows)`.
      read_file: Optional faster reader: `read_file(state, path)` adds a whole file to the
        `ProfileState` and returns True, or returns False, leaving `state` untouched, for
        `row_blocks` to read the file instead.
      exclude_columns: Columns not read (their values are never looked at).

    Raises:
      InvalidInputError: On a column with both numbers and strings, a column
        without any value, a missing label, too many classes or no rows.
    """
    state = ProfileState(columns, label_column, exclude_columns)
    for path in paths:
        if read_file is not None and read_file(state, path):
            continue
        for first_line, rows in row_blocks(path, len(columns)):
            state.observe_rows(path, first_line, rows)
    return state.result(paths)


def _check_labels_present(path: str, first_line: int, rows: List[List[str]], label_index: int,
                          label_column: str) -> None:
    for offset, row in enumerate(rows):
        value = row[label_index].strip()
        if value in MISSING_VALUES:
            raise InvalidInputError(missing_label(label_column, value,
                                                  where(path, first_line + offset)))


def missing_label(label_column: str, value: str, place: str) -> str:
    """The refusal of a row whose label is missing: empty or one of `MISSING_VALUES` (`NA`),
    as the column statistics count a missing value."""
    spelled = f" ({value!r} marks a missing value, as an empty cell does)" if value else ""
    return (f"label column {label_column!r} has no value at {place}{spelled}; every row needs "
            "its label: fill it in or drop the row, or name another column with label_column")


def _kind(name: str, seen: _ColumnSeen, paths: Sequence[str]) -> str:
    if seen.number is not None and seen.string is not None:
        (n_where, number), (s_where, string) = seen.number, seen.string
        raise InvalidInputError(
            f"column {name!r} mixes numbers and strings: {number!r} at {n_where} is a "
            f"number but {string!r} at {s_where} is not; a column must be all numbers "
            f"(missing values may be empty or one of {sorted(MISSING_VALUES - {''})}) or all "
            "categories")
    require(seen.number is not None or seen.string is not None,
            f"column {name!r} of {list(paths)[:3]} has no values, only missing ones; drop it")
    return NUMERIC if seen.string is None else CATEGORICAL

