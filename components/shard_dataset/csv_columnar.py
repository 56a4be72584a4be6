"""The columnar CSV path: a file's pieces profiled and parsed a column at a time with pyarrow.

It gives exactly what the `csv` module path gives (the same column profile,
the same batches, the same errors), only faster: rows come from
`csv_arrow.iter_row_chunks` in the same blocks, and each column of a piece
is converted at once (`csv_cells`). A block holding a value the columnar
code is not sure of (an error to report, an unusual spelling of a number or
a label) is parsed by the Python code; a file the columnar reader declines
(`FastPathDeclined`) is read by the Python code: all of it for the profile,
from the first block not yet given for the batches.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterator, List, Set, Tuple

import numpy as np
import pyarrow.compute as pc

from kfdist.components.shard_dataset import csv_cells
from kfdist.components.shard_dataset.csv_arrow import FastPathDeclined, RowChunk, iter_row_chunks
from kfdist.components.shard_dataset.csv_columns import ColumnLayout, ProfileState, where
from kfdist.components.shard_dataset.source import MAX_NUM_CLASSES, ExampleBatch

#: `parse_block(path, first line, rows, layout)`: the Python parse of a block.
ParseBlock = Callable[[str, int, List[List[str]], ColumnLayout], ExampleBatch]
#: `row_blocks(path, num_columns)`: the Python reader's `(first line, rows)` blocks.
RowBlocks = Callable[[str, int], Iterator[Tuple[int, List[List[str]]]]]
_Found = Dict[int, Tuple[str, str]]


def profile_file(state: ProfileState, path: str) -> bool:
    """Adds a whole file to the profile, as `ProfileState.observe_rows` would block by block.

    A file with anything to report (a row without a label, too many classes, a row
    the columnar reader declines) is left to the Python code, which reports it.

    Returns:
      Whether the file was read (False: `state` is untouched).
    """
    try:
        labels, num_rows, numbers, strings = _profile(state, path)
    except FastPathDeclined:
        return False
    state.add_file(labels, num_rows, numbers, strings)
    return True


def _profile(state: ProfileState, path: str) -> Tuple[Set[str], int, _Found, _Found]:
    labels: Set[str] = set()
    num_rows = 0
    numbers: _Found = {}
    strings: _Found = {}
    known: List[Dict[str, bool]] = [{} for _ in state.feature_index]
    for chunk in iter_row_chunks(path, len(state.columns)):
        label = csv_cells.stripped(chunk.table.column(state.label_index))
        if pc.any(pc.equal(label, "")).as_py():
            raise FastPathDeclined("a row without a label")
        labels.update(pc.unique(label).to_pylist())
        if len(labels | state.labels) > MAX_NUM_CLASSES:
            raise FastPathDeclined("too many classes")
        num_rows += chunk.table.num_rows
        for k, i in enumerate(state.feature_index):
            seen = state.seen[k]
            need = (seen.number is None and k not in numbers,
                    seen.string is None and k not in strings)
            if any(need):
                _first_kinds(path, chunk, i, known[k], need, (numbers, strings), k)
    return labels, num_rows, numbers, strings


def _first_kinds(path: str, chunk: RowChunk, column: int, known: Dict[str, bool],
                 need: Tuple[bool, bool], found: Tuple[_Found, _Found], k: int) -> None:
    """Records the first number and the first string of column `column` in `chunk` (those
    `need` asks for) as feature `k`'s, in `found` (numbers, strings)."""
    masks = csv_cells.kinds(chunk.table.column(column), known)
    for kind in (0, 1):
        if need[kind] and masks[kind].any():
            row = int(np.argmax(masks[kind]))
            found[kind][k] = (where(path, int(chunk.lines[row])), masks[2][row].as_py())


def _parse_chunk(path: str, chunk: RowChunk, layout: ColumnLayout,
                 parse_block: ParseBlock) -> Iterator[ExampleBatch]:
    """The batches of a chunk: converted a column at a time; a block with a value the columnar
    code is not sure of goes to `parse_block`."""
    table, n = chunk.table, chunk.table.num_rows
    values = np.empty((n, len(layout.numeric_index)), np.float64)
    unsure = np.zeros(n, bool)
    for j, i in enumerate(layout.numeric_index):
        values[:, j], bad = csv_cells.numbers(table.column(i))
        if bad is not None:
            unsure |= bad
    with np.errstate(over="ignore"):  # beyond float32 range becomes inf: the Python code reports it
        features = values.astype(np.float32)
    unsure |= np.isinf(features).any(axis=1)
    labels, bad = csv_cells.labels(table.column(layout.label_index), layout.label_to_id)
    unsure |= bad
    categorical = None
    if layout.categorical_index:
        categorical = np.empty((n, len(layout.categorical_index)), dtype=object)
        for j, i in enumerate(layout.categorical_index):
            categorical[:, j] = csv_cells.strings(table.column(i))
    for start, stop in chunk.blocks:
        if unsure[start:stop].any():
            yield parse_block(path, int(chunk.lines[start]), chunk.rows(start, stop), layout)
        else:
            yield ExampleBatch(
                inputs=features[start:stop], labels=labels[start:stop], origin=path,
                categorical=None if categorical is None else categorical[start:stop])


def read_batches(path: str, layout: ColumnLayout, num_columns: int, parse_block: ParseBlock,
                 row_blocks: RowBlocks) -> Iterator[ExampleBatch]:
    """The batches of a CSV file, exactly as `parse_block` over `row_blocks` gives them.

    Args:
      path: A local CSV file (plain or gzip).
      layout: Where the label, numeric and categorical values are.
      num_columns: Columns of the header.
      parse_block: The Python parse of a block (for blocks the columnar code is not sure of).
      row_blocks: The Python reader (for a file the columnar reader declines; it goes on
        after the blocks already given).

    Raises:
      InvalidInputError: As `parse_block` and `row_blocks` raise it.
    """
    done = 0
    try:
        for chunk in iter_row_chunks(path, num_columns):
            for batch in _parse_chunk(path, chunk, layout, parse_block):
                yield batch
                done += 1
    except FastPathDeclined:
        for index, (first_line, rows) in enumerate(row_blocks(path, num_columns)):
            if index >= done:
                yield parse_block(path, first_line, rows, layout)
