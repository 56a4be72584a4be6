"""CSV sources: a header row, one label column, numeric and string (categorical) columns.

Labels are class numbers or class names, mapped to ids as `label_values`
says (names, and numbers other than 0..k-1, become the dataset's
`class_names`), or for a regression numbers kept as they are (float64); a
label column mixing numbers and text is refused. The numeric
columns, in file order, become the canonical float32 `features` vector
(missing values as NaN); the string columns are kept as raw values in the
`categorical` feature. Opening a source reads every file once to learn each
column's kind and the classes (`csv_columns`); the values are checked again
while streaming, before any shard is written.

Files are read with pyarrow's streaming reader (`csv_arrow`). The `csv`
module code here is what that path must equal: it reads every file (from the
first row not yet given) that pyarrow cannot vouch for, so the rows and the
error messages (file, line, column) are the same either way.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from typing import Dict, Iterator, List, Sequence, TextIO, Tuple

import numpy as np

from kfdist.components.common.dataset_spec import FEATURES_KEY, REGRESSION, FeatureSpec
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.common.serving_inputs import check_input_names
from kfdist.components.shard_dataset import csv_arrow
from kfdist.components.shard_dataset.scan import SourceChangedError
from kfdist.components.shard_dataset.csv_columns import (
    MISSING_VALUES, ColumnLayout, profile_columns)
from kfdist.components.shard_dataset.label_values import label_classes
from kfdist.components.shard_dataset.source import (
    BATCH_SIZE, ExampleBatch, ReaderOptions, Source, is_gzip_file)

CSV_SUFFIXES = (".csv", ".csv.gz")
FLOAT32_MAX = float(np.finfo(np.float32).max)


def is_csv_file(path: str) -> bool:
    """Returns whether `path` is named like a CSV file."""
    return path.lower().endswith(CSV_SUFFIXES)


def _open_text(path: str) -> TextIO:
    if is_gzip_file(path):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def read_header(path: str, label_column: str) -> Tuple[str, ...]:
    """Reads and checks the header row of a CSV file.

    Raises:
      InvalidInputError: If the file is empty, has duplicate columns, lacks
        `label_column` or has no feature column.
    """
    with _open_text(path) as f:
        header = next(csv.reader(f), None)
    require(bool(header), f"CSV file {path!r} is empty; expected a header row")
    columns = tuple(name.strip() for name in header)
    require(len(set(columns)) == len(columns),
            f"CSV file {path!r} has duplicate column names: {list(columns)}")
    require(label_column in columns,
            f"CSV file {path!r} has no label column {label_column!r}; "
            f"its columns are {list(columns)}")
    require(len(columns) > 1, f"CSV file {path!r} has only the label column; "
                              "expected at least one feature column")
    check_input_names([c for c in columns if c != label_column], f"CSV file {path!r}: ")
    return columns


def check_excluded(columns: Tuple[str, ...], label_column: str,
                   exclude_columns: Sequence[str]) -> None:
    """Checks that `exclude_columns` are feature columns of the header and leave one.

    Raises:
      InvalidInputError: Naming an unknown column and the valid ones, the label, or
        that no feature column is left.
    """
    features = [c for c in columns if c != label_column]
    for name in exclude_columns:
        require(name != label_column,
                f"exclude_columns names the label column {name!r}; a dataset needs its label")
        require(name in features, f"exclude_columns names {name!r}, which is not a column of "
                                  f"the source; its feature columns are {features}")
    require(len(set(exclude_columns)) < len(features),
            f"exclude_columns {list(exclude_columns)} leaves no feature column; the feature "
            f"columns are {features}")


def _iter_row_blocks(path: str, num_columns: int) -> Iterator[Tuple[int, List[List[str]]]]:
    """Yields `(line number of the first row, rows)` blocks of rows on consecutive lines,
    checking row widths (a blank line or a quoted newline starts a new block, so
    `first line + offset` is always a row's line in the file)."""
    with _open_text(path) as f:
        reader = csv.reader(f)
        next(reader)
        block: List[List[str]] = []
        first_line, read_up_to = 2, reader.line_num
        for row in reader:
            start, read_up_to = read_up_to + 1, reader.line_num  # the row's first line
            if not row:
                continue
            if len(row) != num_columns:
                raise InvalidInputError(
                    f"CSV file {path!r} line {start} has {len(row)} values; "
                    f"the header has {num_columns} columns")
            if block and start != first_line + len(block):
                yield first_line, block
                block = []
            if not block:
                first_line = start
            block.append(row)
            if len(block) == BATCH_SIZE:
                yield first_line, block
                block = []
        if block:
            yield first_line, block


def locate_rows(path: str, num_columns: int, rows: Sequence[int]
                ) -> Dict[int, Tuple[int, List[str]]]:
    """`{row: (its first line, its values)}` for data rows counted from 0, as read here."""
    wanted, found, seen = set(rows), {}, 0
    for first_line, block in _iter_row_blocks(path, num_columns):
        for offset in sorted(r - seen for r in wanted if seen <= r < seen + len(block)):
            found[seen + offset] = (first_line + offset, block[offset])
        seen += len(block)
        if len(found) == len(wanted):
            break
    return found


def _python_batches(path: str, layout: ColumnLayout, num_columns: int, skip: int = 0
                    ) -> Iterator[ExampleBatch]:
    """The batches of the `csv` module path, after the first `skip` rows."""
    seen = 0  # data rows before the block
    for first_line, rows in _iter_row_blocks(path, num_columns):
        if skip >= len(rows):
            skip -= len(rows)
            seen += len(rows)
            continue
        yield _parse_block(path, first_line + skip, rows[skip:], layout, seen + skip)
        seen += len(rows)
        skip = 0


def _arrow_batches(path: str, layout: ColumnLayout, num_columns: int) -> Iterator[ExampleBatch]:
    """The batches of the pyarrow path; from where it declines, the `csv` module path's."""
    given = 0
    try:
        for batch in csv_arrow.read_batches(path, layout, num_columns):
            given += len(batch.labels)
            yield batch
    except csv_arrow.FastPathDeclined:
        yield from _python_batches(path, layout, num_columns, skip=given)


def _first_bad_value(path: str, first_line: int, rows: List[List[str]],
                     columns: Tuple[str, ...], numeric_index: List[int]) -> str:
    for offset, row in enumerate(rows):
        for i in numeric_index:
            if row[i].strip() in MISSING_VALUES:
                continue
            try:
                value = float(row[i])
            except ValueError:
                value = math.inf
            if math.isinf(value) or abs(value) > FLOAT32_MAX:
                return (f"CSV file {path!r} line {first_line + offset}, column {columns[i]!r}: "
                        f"value {row[i]!r} is not a finite float32 number; column "
                        f"{columns[i]!r} holds numbers")
    return f"CSV file {path!r}: non-numeric value near line {first_line}"


def _parse_block(path: str, first_line: int, rows: List[List[str]], layout: ColumnLayout,
                 first_row: int) -> ExampleBatch:
    try:
        with np.errstate(over="ignore"):  # beyond float32 range becomes inf: reported below
            cells = [["nan" if row[i].strip() in MISSING_VALUES else row[i]
                      for i in layout.numeric_index] for row in rows]
            features = np.array(cells, dtype=np.float64).reshape(
                len(rows), len(layout.numeric_index)).astype(np.float32)
        ok = not bool(np.isinf(features).any())
    except ValueError:
        ok = False
    if not ok:
        raise InvalidInputError(_first_bad_value(path, first_line, rows, layout.columns,
                                                 layout.numeric_index))
    categorical = None
    if layout.categorical_index:
        categorical = np.array([[row[i].strip() for i in layout.categorical_index] for row in rows],
                               dtype=object).reshape(len(rows), len(layout.categorical_index))
    try:
        labels = np.array([layout.label_to_id(row[layout.label_index].strip()) for row in rows],
                          dtype=layout.label_dtype)
    except (KeyError, ValueError, OverflowError) as e:
        raise SourceChangedError(
            f"CSV file {path!r} near line {first_line}: label {e.args[0]!r} is not one the scan "
            f"of the source found; the file changed after it was scanned, run again") from None
    return ExampleBatch(inputs=features, labels=labels, origin=path, categorical=categorical,
                        first_row=first_row)


def open_csv_source(files: Sequence[str], options: ReaderOptions, columnar: bool = True) -> Source:
    """Validates CSV files (headers, column kinds, labels) and returns them as one source.

    Args:
      files: The CSV files, in order.
      options: The label column, the columns not to read (and no image shape).
      columnar: Read with pyarrow (`csv_arrow`), which gives the same profile, rows
        and errors as the `csv` module path (False), faster.

    Raises:
      InvalidInputError: If headers differ between files or are invalid, a
        column mixes numbers and strings, the label is no class (`label_values`), or
        `options.image_shape` is set
        (CSV holds tables, not images).
    """
    require(options.image_shape is None,
            f"image_shape {options.image_shape} applies to image sources only; "
            "CSV columns become a feature vector, leave image_shape unset")
    require(bool(files), "no CSV files given")
    columns = read_header(files[0], options.label_column)
    for path in files[1:]:
        other = read_header(path, options.label_column)
        require(other == columns, f"CSV file {path!r} has columns {list(other)} but "
                                  f"{files[0]!r} has {list(columns)}; they must match")
    check_excluded(columns, options.label_column, options.exclude_columns)
    profile = profile_columns(
        files, columns, options.label_column, _iter_row_blocks,
        (lambda state, path: csv_arrow.profile_file(state, path, locate_rows)) if columnar
        else None, options.exclude_columns)
    label_index = columns.index(options.label_column)
    classes = label_classes(profile.labels, options.label_column, paths=files,
                            num_columns=len(columns), label_index=label_index,
                            row_blocks=_iter_row_blocks, task=options.task)
    layout = ColumnLayout(
        columns=columns, label_index=label_index,
        numeric_index=[columns.index(c) for c in profile.numeric],
        categorical_index=[columns.index(c) for c in profile.categorical],
        label_to_id=classes.ids.__getitem__,
        label_dtype=np.float64 if classes.task == REGRESSION else np.int64)

    def read_unit(index: int) -> Iterator[ExampleBatch]:
        read = _arrow_batches if columnar else _python_batches
        return read(files[index], layout, len(columns))

    return Source(
        source_format="csv", files=tuple(files),
        feature=FeatureSpec(key=FEATURES_KEY, dtype="float32", shape=(len(profile.numeric),),
                            columns=profile.numeric,
                            categorical_columns=profile.categorical or None),
        class_names=classes.names, units=tuple(files), read_unit=read_unit, task=classes.task)
