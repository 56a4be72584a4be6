"""CSV files read with pyarrow's streaming reader (`pyarrow.csv.open_csv`): the fast path.

pyarrow parses and converts blocks of rows in C++: numeric columns straight to
float64 (the `MISSING_VALUES` tokens as nulls), the label and string columns as
strings. It is trusted only where it reads what the `csv` module path
(`csv_reader`) reads; on anything else (a value pyarrow will not convert, a row
of the wrong width, bytes that are not UTF-8, an infinity, a label outside the
profile, a numeric column spelled in a way only Python reads) it raises
`FastPathDeclined`, and the caller reads the file (from the first row not yet
given) with the `csv` module, which reads it or reports the error with its file,
line and column. `tests/unit/test_csv_fast_path.py` holds the two paths equal on
the inputs where they could differ.
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from kfdist.components.shard_dataset.csv_columns import (
    MAX_REMEMBERED, MISSING_VALUES, ColumnLayout, ProfileState, is_number, where)
from kfdist.components.shard_dataset.source import MAX_NUM_CLASSES, ExampleBatch

#: Bytes of CSV pyarrow parses into one record batch.
BLOCK_BYTES = 1 << 20
#: Per feature position, the data row (from 0) of a column's first number or string in a file.
_Found = Dict[int, int]
#: `locate_rows(path, num_columns, rows)`: `{row: (its first line, its cells)}` for data rows
#: counted from 0, as the `csv` module reads them.
LocateRows = Callable[[str, int, Sequence[int]], Dict[int, Tuple[int, List[str]]]]


class FastPathDeclined(Exception):
    """pyarrow cannot vouch for this file: read it with the `csv` module."""


def _open(path: str, num_columns: int, types: Dict[int, pa.DataType]) -> pacsv.CSVStreamingReader:
    """A streaming reader of the data rows of `path`, columns `types` only, named by position."""
    try:
        return pacsv.open_csv(
            path, read_options=pacsv.ReadOptions(
                skip_rows=1, column_names=[str(i) for i in range(num_columns)],
                block_size=BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                include_columns=[str(i) for i in types],
                column_types={str(i): t for i, t in types.items()},
                null_values=sorted(MISSING_VALUES), strings_can_be_null=False))
    except (OSError, pa.ArrowException) as e:
        raise FastPathDeclined(str(e)) from e


def _record_batches(path: str, num_columns: int, types: Dict[int, pa.DataType]
                    ) -> Iterator[pa.RecordBatch]:
    """Every record batch of `path`; a parse or conversion error declines the file."""
    reader = _open(path, num_columns, types)
    try:
        while True:
            try:
                yield reader.read_next_batch()
            except StopIteration:
                return
    except (OSError, pa.ArrowException, UnicodeDecodeError) as e:
        raise FastPathDeclined(str(e)) from e
    finally:
        reader.close()


def _distinct_stripped(column: pa.Array) -> Tuple[np.ndarray, np.ndarray]:
    """`(distinct values with str.strip applied, index of each cell's value)`."""
    encoded = pc.dictionary_encode(column)
    values = np.array([v.strip() for v in encoded.dictionary.to_pylist()], dtype=object)
    return values, encoded.indices.to_numpy(zero_copy_only=False)


# ----------------------------------------------------------------------------- the profile


def _first_block_kinds(state: ProfileState, path: str) -> Dict[int, pa.DataType]:
    """How to read each column: float64 for a feature whose values in the first block are all
    numbers or missing (so pyarrow's conversion checks every later one), else strings."""
    columns = [state.label_index, *state.feature_index]
    with contextlib.closing(_record_batches(path, len(state.columns),
                                            dict.fromkeys(columns, pa.string()))) as batches:
        first = next(batches, None)  # the reader is closed at once, not when collected
    types = {state.label_index: pa.string()}
    for i in state.feature_index:
        numeric = first is None or all(
            v in MISSING_VALUES or is_number(v) for v in _distinct_stripped(
                first.column(str(i)))[0].tolist())
        types[i] = pa.float64() if numeric else pa.string()
    return types


def _first_present(mask: np.ndarray, offset: int) -> Optional[int]:
    return offset + int(np.argmax(mask)) if mask.any() else None


def _observe_strings(column: pa.Array, known: Dict[str, bool], offset: int,
                     want_first: bool) -> Optional[int]:
    """Declines if a column read as strings holds a number; with `want_first`, returns the row
    of its first string (None: none in `column`)."""
    values, index = _distinct_stripped(column)
    for value in values.tolist():
        if value not in known:
            if len(known) >= MAX_REMEMBERED:
                known.clear()
            known[value] = value not in MISSING_VALUES and is_number(value)
        if known[value]:  # a number among strings: mixed, or numbers Python alone reads
            raise FastPathDeclined("a string column holds a number")
    if not want_first or not len(values):
        return None
    present = np.array([v not in MISSING_VALUES for v in values.tolist()], bool)
    return _first_present(present[index], offset)


def _profile(state: ProfileState, path: str) -> Tuple[Set[str], int, _Found, _Found]:
    types = _first_block_kinds(state, path)
    labels: Set[str] = set()
    numbers: _Found = {}
    strings: _Found = {}
    known: List[Dict[str, bool]] = [{} for _ in state.feature_index]
    rows = 0
    for batch in _record_batches(path, len(state.columns), types):
        values, _ = _distinct_stripped(batch.column(str(state.label_index)))
        if any(v in MISSING_VALUES for v in values.tolist()):
            raise FastPathDeclined("a row without a label")
        labels.update(values.tolist())
        if len(labels | state.labels) > MAX_NUM_CLASSES:
            raise FastPathDeclined("too many classes")
        for k, i in enumerate(state.feature_index):
            column = batch.column(str(i))
            if types[i] == pa.float64():
                if k not in numbers:
                    row = _first_present(column.is_valid().to_numpy(zero_copy_only=False), rows)
                    if row is not None:
                        numbers[k] = row
            else:
                row = _observe_strings(column, known[k], rows, want_first=k not in strings)
                if row is not None:
                    strings[k] = row
        rows += batch.num_rows
    return labels, rows, numbers, strings


def profile_file(state: ProfileState, path: str, locate_rows: LocateRows) -> bool:
    """Adds a whole file to the profile, as `ProfileState.observe_rows` would block by block.

    A file with anything to report (a row without a label, too many classes, a mixed
    column, a row pyarrow declines) is left to the `csv` module path, which reports it.

    Args:
      state: The profile so far.
      path: A local CSV file (plain or gzip).
      locate_rows: Finds data rows' lines and values (where a column's first number and
        first string are, for the message about a column that mixes them).

    Returns:
      Whether the file was read (False: `state` is untouched).
    """
    try:
        labels, num_rows, numbers, strings = _profile(state, path)
    except FastPathDeclined:
        return False
    # Only a column whose first number (string) is still unknown needs this file's.
    numbers = {k: row for k, row in numbers.items() if state.seen[k].number is None}
    strings = {k: row for k, row in strings.items() if state.seen[k].string is None}
    rows = sorted({*numbers.values(), *strings.values()})
    found = locate_rows(path, len(state.columns), rows) if rows else {}
    if len(found) < len(rows):  # the `csv` module reads fewer rows: it reads the file
        return False

    def place(k: int, row: int) -> Tuple[str, str]:
        line, cells = found[row]
        return where(path, line), cells[state.feature_index[k]].strip()

    state.add_file(labels, num_rows, {k: place(k, row) for k, row in numbers.items()},
                   {k: place(k, row) for k, row in strings.items()})
    return True


# ----------------------------------------------------------------------------- the batches


def read_batches(path: str, layout: ColumnLayout, num_columns: int) -> Iterator[ExampleBatch]:
    """The batches of a CSV file: float32 features (NaN where missing), class ids, stripped
    strings, one batch per block of `BLOCK_BYTES`.

    Raises:
      FastPathDeclined: On anything only the `csv` module path may judge (after the
        batches before it were given).
    """
    types = {i: pa.float64() for i in layout.numeric_index}
    types.update({i: pa.string() for i in (layout.label_index, *layout.categorical_index)})
    first_row = 0
    for batch in _record_batches(path, num_columns, types):
        n = batch.num_rows
        features = np.empty((n, len(layout.numeric_index)), np.float32)
        with np.errstate(over="ignore"):  # beyond float32 range becomes inf: declined below
            for j, i in enumerate(layout.numeric_index):
                features[:, j] = pc.fill_null(batch.column(str(i)), math.nan).to_numpy()
        if np.isinf(features).any():
            raise FastPathDeclined("a value beyond float32's range")
        values, index = _distinct_stripped(batch.column(str(layout.label_index)))
        try:
            ids = np.array([layout.label_to_id(v) for v in values.tolist()], layout.label_dtype)
        except (KeyError, ValueError, OverflowError) as e:
            raise FastPathDeclined("a label outside the profile") from e
        categorical = None
        if layout.categorical_index:
            categorical = np.empty((n, len(layout.categorical_index)), dtype=object)
            for j, i in enumerate(layout.categorical_index):
                strings, where = _distinct_stripped(batch.column(str(i)))
                categorical[:, j] = strings[where]
        yield ExampleBatch(inputs=features, labels=ids[index], origin=path,
                           categorical=categorical, first_row=first_row)
        first_row += n
