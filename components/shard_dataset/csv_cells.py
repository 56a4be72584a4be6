"""Whole columns of raw CSV values, read the way the `csv` module path reads single cells.

Every function takes a pyarrow string column (null: an empty value) and
gives the same answer as the per-cell Python code of `csv_columns` and
`csv_reader` (`str.strip`, the `MISSING_VALUES` check, `float`, the label
mapping) for a whole column. Where that is not certain, the cells are
flagged and the caller reads their rows with the Python code.
"""

from __future__ import annotations

import math
from typing import Callable, Dict, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kfdist.components.shard_dataset.csv_columns import MAX_REMEMBERED, MISSING_VALUES, is_number

#: What `str.strip()` removes: every character for which `str.isspace()` holds (spelled out:
#: finding them takes a scan of every code point, on every import).
WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004"
              "\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_MISSING = pa.array(sorted(MISSING_VALUES), pa.string())
#: A plain decimal number: pyarrow, numpy and `float` all read it, to the same double.
_DECIMAL = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_NULL = pa.scalar(None, pa.string())


def stripped(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Each value with `str.strip()` applied (an empty value as "")."""
    return pc.utf8_trim(pc.fill_null(column, ""), characters=WHITESPACE)


def _mask(mask: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)


def _plain_numbers(column: pa.ChunkedArray) -> Optional[np.ndarray]:
    """The values as float64 (NaN where missing), if every value is missing or a number
    pyarrow reads that is no `nan` spelling (a plain decimal, or an infinity, which
    `float` reads alike)."""
    for tokens_too in (False, True):  # first: empty values only (null already)
        try:
            values = pc.cast(pc.if_else(pc.is_in(column, value_set=_MISSING), _NULL, column)
                             if tokens_too else column, pa.float64())
        except pa.ArrowInvalid:
            continue
        out = pc.fill_null(values, math.nan).to_numpy()
        return out if np.count_nonzero(np.isnan(out)) == values.null_count else None
    return None


def numbers(column: pa.ChunkedArray) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """A numeric column's values as `csv_reader` reads them: float64, NaN where missing.

    Returns:
      `(values, unsure)`: `unsure` flags the cells left to the Python code (a value that
      is not a plain decimal number, or has whitespace `float` might not take as
      `str.strip` does); None: none.
    """
    plain = _plain_numbers(column)
    if plain is not None:  # an infinity is left to the caller's float32 range check
        return plain, None
    raw = pc.fill_null(column, "")
    text = stripped(column)
    missing = pc.is_in(text, value_set=_MISSING)
    decimal = pc.match_substring_regex(text, _DECIMAL)
    try:
        values = np.array(pc.fill_null(pc.cast(pc.if_else(decimal, text, _NULL), pa.float64()),
                                       math.nan).to_numpy())
    except pa.ArrowInvalid:
        return np.full(len(column), math.nan), ~_mask(missing)
    unsure = ~_mask(missing) & ~_mask(decimal)
    spaced = np.flatnonzero(_mask(pc.and_(decimal, pc.not_equal(text, raw))))
    if len(spaced):  # the Python code parses these as written, whitespace and all
        try:
            values[spaced] = np.array(raw.take(spaced).to_pylist(), dtype=np.float64)
        except ValueError:
            unsure[spaced] = True
    return values, unsure


def kinds(column: pa.ChunkedArray, known: Dict[str, bool]
          ) -> Tuple[np.ndarray, np.ndarray, pa.ChunkedArray]:
    """Which values are numbers and which are strings, as `csv_columns` tells them.

    Args:
      column: Raw values.
      known: `is_number` of values already classified (read and extended).

    Returns:
      `(number, string, stripped values)`; a missing value is neither.
    """
    plain = _plain_numbers(column)
    if plain is not None:
        return ~np.isnan(plain), np.zeros(len(column), bool), column
    text = stripped(column)
    present = pc.invert(pc.is_in(text, value_set=_MISSING))
    distinct = pc.unique(pc.filter(text, present)).to_pylist()
    for value in distinct:
        if value not in known:
            if len(known) >= MAX_REMEMBERED:
                known.clear()
            known[value] = is_number(value)
    found = pa.array([v for v in distinct if known[v]], pa.string())
    number = _mask(pc.is_in(text, value_set=found))
    return number, _mask(present) & ~number, text


def labels(column: pa.ChunkedArray, label_to_id: Callable[[str], int]
           ) -> Tuple[np.ndarray, np.ndarray]:
    """Class ids `label_to_id(value.strip())`, and which cells the Python code must read
    (where the mapping fails or leaves int64)."""
    text = stripped(column)
    distinct = pc.unique(text)
    ids = np.zeros(len(distinct), np.int64)
    fails = np.zeros(len(distinct), bool)
    for k, value in enumerate(distinct.to_pylist()):
        try:
            ids[k] = label_to_id(value)
        except (KeyError, ValueError, OverflowError):
            fails[k] = True
    index = pc.index_in(text, value_set=distinct).to_numpy(zero_copy_only=False)
    return ids[index], fails[index]


def strings(column: pa.ChunkedArray) -> np.ndarray:
    """A categorical column's values, stripped, as an object array of `str`."""
    return np.asarray(stripped(column).to_numpy(zero_copy_only=False), dtype=object)
