"""CSV sources: a header row, one label column, every other column numeric.

Labels are integer class ids, or class names that are mapped to ids in
sorted order (the names become the dataset's `class_names`). The feature
columns, in file order, become the canonical float32 `features` vector.
Opening a source reads the label column of every file once (to learn the
classes); the numeric values are checked while streaming, before any shard
is written.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from typing import Callable, Iterator, List, Optional, Sequence, Set, TextIO, Tuple

import numpy as np

from kfdist.components.common.dataset_spec import FEATURES_KEY, FeatureSpec
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.shard_dataset.source import (
    BATCH_SIZE, MAX_NUM_CLASSES, ExampleBatch, ReaderOptions, Source, is_gzip_file)

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
                              "expected at least one numeric feature column")
    return columns


def _iter_row_blocks(path: str, num_columns: int) -> Iterator[Tuple[int, List[List[str]]]]:
    """Yields `(line number of the first row, rows)` blocks, checking row widths."""
    with _open_text(path) as f:
        reader = csv.reader(f)
        next(reader)
        block: List[List[str]] = []
        first_line = 2
        for row in reader:
            if not row:
                continue
            if len(row) != num_columns:
                raise InvalidInputError(
                    f"CSV file {path!r} line {reader.line_num} has {len(row)} values; "
                    f"the header has {num_columns} columns")
            if not block:
                first_line = reader.line_num
            block.append(row)
            if len(block) == BATCH_SIZE:
                yield first_line, block
                block = []
        if block:
            yield first_line, block


def _parse_int(text: str) -> Optional[int]:
    try:
        return int(text)
    except ValueError:
        return None


def scan_labels(paths: Sequence[str], columns: Tuple[str, ...],
                label_column: str) -> Optional[Tuple[str, ...]]:
    """Reads every label once and decides how labels map to class ids.

    Returns:
      None when every label is an integer id, else the sorted distinct class
      names (index = class id).

    Raises:
      InvalidInputError: On negative ids, too many classes or no rows.
    """
    index = columns.index(label_column)
    names: Set[str] = set()
    num_rows = 0
    for path in paths:
        for _, rows in _iter_row_blocks(path, len(columns)):
            names.update(row[index].strip() for row in rows)
            num_rows += len(rows)
            require(len(names) <= MAX_NUM_CLASSES,
                    f"label column {label_column!r} has over {MAX_NUM_CLASSES} distinct "
                    "values; is it really the class label?")
    require(num_rows > 0, f"CSV files {list(paths)} have a header but no rows")
    ids = {name: _parse_int(name) for name in names}
    if all(i is not None for i in ids.values()):
        low = min(i for i in ids.values() if i is not None)
        require(low >= 0, f"label {low} in column {label_column!r} is negative; "
                          "class ids must be 0 or more")
        return None
    return tuple(sorted(names))


def _first_bad_value(path: str, first_line: int, rows: List[List[str]],
                     columns: Tuple[str, ...], feature_index: List[int]) -> str:
    for offset, row in enumerate(rows):
        for i in feature_index:
            try:
                value = float(row[i])
            except ValueError:
                value = math.nan
            if not math.isfinite(value) or abs(value) > FLOAT32_MAX:
                return (f"CSV file {path!r} line {first_line + offset}, column {columns[i]!r}: "
                        f"value {row[i]!r} is not a finite float32 number; every column but "
                        "the label must be numeric")
    return f"CSV file {path!r}: non-numeric value near line {first_line}"


def _parse_block(path: str, first_line: int, rows: List[List[str]], columns: Tuple[str, ...],
                 feature_index: List[int], label_to_id: Callable[[str], int], label_index: int
                 ) -> ExampleBatch:
    try:
        with np.errstate(over="ignore"):  # beyond float32 range becomes inf: reported below
            features = np.array([[row[i] for i in feature_index] for row in rows],
                                dtype=np.float64).astype(np.float32)
        ok = bool(np.isfinite(features).all())
    except ValueError:
        ok = False
    if not ok:
        raise InvalidInputError(_first_bad_value(path, first_line, rows, columns, feature_index))
    labels = np.array([label_to_id(row[label_index].strip()) for row in rows], dtype=np.int64)
    return ExampleBatch(inputs=features, labels=labels, origin=path)


def open_csv_source(files: Sequence[str], options: ReaderOptions) -> Source:
    """Validates CSV files (headers, labels) and returns them as one source.

    Raises:
      InvalidInputError: If headers differ between files or are invalid, or
        `options.image_shape` is set (CSV holds feature vectors, not images).
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
    class_names = scan_labels(files, columns, options.label_column)
    label_index = columns.index(options.label_column)
    feature_index = [i for i in range(len(columns)) if i != label_index]
    if class_names is None:
        label_to_id: Callable[[str], int] = int
    else:
        label_to_id = {name: i for i, name in enumerate(class_names)}.__getitem__

    def read_batches() -> Iterator[ExampleBatch]:
        for path in files:
            for first_line, rows in _iter_row_blocks(path, len(columns)):
                yield _parse_block(path, first_line, rows, columns, feature_index,
                                   label_to_id, label_index)

    return Source(
        source_format="csv", files=tuple(files),
        feature=FeatureSpec(key=FEATURES_KEY, dtype="float32", shape=(len(feature_index),),
                            columns=tuple(columns[i] for i in feature_index)),
        class_names=class_names, read_batches=read_batches)
