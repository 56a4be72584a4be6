"""CSV rows read with pyarrow, in exactly the rows, lines and blocks of the `csv` module reader.

A file is read in pieces of about `PIECE_BYTES` that end on a row boundary.
The bytes of a piece tell each row's first line (a quoted value may hold line
breaks, a blank line holds no row); pyarrow parses the piece with every
column as a string. The rows then come in the blocks of
`csv_reader._iter_row_blocks`: rows on consecutive lines, at most
`BATCH_SIZE`, so both readers cut a file into the same batches.

Whatever this reader cannot vouch for raises `FastPathDeclined`, and the
caller reads the file with the `csv` module instead, which then reports any
error itself: a quote that does not open or close a value (`a"b`, `"a"b`,
` "a"`), an unterminated quote, a NUL byte, a value near `csv`'s field size
limit, bytes that are not UTF-8, a gzip error, or any pyarrow error (such as
a row with the wrong number of values).
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import zlib
from typing import Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from kfdist.components.shard_dataset.source import BATCH_SIZE, open_binary

#: Bytes read at a time (a piece is cut at the last row boundary in them).
PIECE_BYTES = 8 << 20
#: A row may span this many pieces' bytes (the `csv` module reads longer ones).
_MAX_PIECES_PER_ROW = 4
#: Bytes pyarrow parses per task (a piece's blocks are parsed in parallel).
_PARSE_BLOCK_BYTES = 1 << 20
_QUOTE, _COMMA, _LF, _CR = ord('"'), ord(","), ord("\n"), ord("\r")


class FastPathDeclined(Exception):
    """The columnar reader cannot vouch for this input: read it with the `csv` module."""


@dataclasses.dataclass(frozen=True)
class RowChunk:
    """Consecutive rows of a file, cut into the `csv` reader's blocks.

    Attributes:
      table: The rows' raw values, one string column per CSV column (null: empty).
      lines: Each row's first line in the file.
      blocks: `(start, stop)` row ranges of the blocks, covering every row in order.
    """

    table: pa.Table
    lines: np.ndarray
    blocks: List[Tuple[int, int]]

    def rows(self, start: int, stop: int) -> List[List[str]]:
        """Rows `start:stop` as lists of strings, as the `csv` module reads them."""
        columns = [pc.fill_null(c, "").to_pylist()
                   for c in self.table.slice(start, stop - start).columns]
        return [list(row) for row in zip(*columns)]


def _row_end(buf: bytes) -> int:
    """Where the last line feed outside quotes in `buf` ends (-1: none)."""
    total, after, end = buf.count(b'"'), 0, len(buf)
    p = buf.rfind(b"\n")
    while p >= 0:
        after += buf.count(b'"', p, end)
        end = p
        if (total - after) % 2 == 0:
            return p + 1
        p = buf.rfind(b"\n", 0, p)
    return -1


def _pieces(path: str, piece_bytes: int) -> Iterator[bytes]:
    """The (decompressed) bytes of `path` after a leading UTF-8 BOM, in pieces that end
    after a line feed outside quotes (the last piece: whatever is left)."""
    try:
        with open_binary(path) as f:
            buf = f.read(max(piece_bytes, len(codecs.BOM_UTF8)))
            if buf.startswith(codecs.BOM_UTF8):  # dropped, as Python's utf-8-sig decoding does
                buf = buf[len(codecs.BOM_UTF8):]
            while True:
                cut = _row_end(buf)
                if cut > 0:
                    yield buf[:cut]
                    buf = buf[cut:]
                elif len(buf) > _MAX_PIECES_PER_ROW * piece_bytes:  # (or lines end with CR only)
                    raise FastPathDeclined("a row longer than the pieces read at a time")
                data = f.read(piece_bytes)
                if not data:
                    if buf:
                        yield buf
                    return
                buf += data
    except (OSError, EOFError, zlib.error) as e:
        raise FastPathDeclined(f"cannot read {path!r}: {e}") from e


def _check_quotes(b: np.ndarray, quotes: np.ndarray) -> None:
    """Declines unless every quote opens a value (after a comma, a line break or a doubled
    quote) or closes one (before a comma, a line break, a doubled quote or the end), so
    that an odd number of quotes before a byte means it lies inside a quoted value."""
    if len(quotes) % 2:
        raise FastPathDeclined("unterminated quote")

    def allowed(c: np.ndarray) -> bool:
        return bool(((c == _COMMA) | (c == _LF) | (c == _CR) | (c == _QUOTE)).all())

    opening, closing = quotes[0::2], quotes[1::2]
    if not (allowed(b[opening[opening > 0] - 1]) and allowed(b[closing[closing < len(b) - 1] + 1])):
        raise FastPathDeclined("a quote inside an unquoted value or after a closing quote")


@dataclasses.dataclass(frozen=True)
class _PieceRows:
    """Where the rows of a piece are: each row's first line, the line after the piece, the
    longest row in bytes and whether a quoted value breaks a line."""

    lines: np.ndarray
    next_line: int
    longest: int
    quoted_breaks: bool


def _row_lines(piece: bytes, first_line: int) -> _PieceRows:
    """The rows of `piece`, whose first line is `first_line`. A line ends at LF, CRLF or a
    lone CR (as in Python's text files); a line break inside quotes continues the row, and
    an empty line holds no row."""
    b = np.frombuffer(piece, np.uint8)
    quotes = np.flatnonzero(b == _QUOTE)
    _check_quotes(b, quotes)
    ends = np.flatnonzero(b == _LF)
    starts = ends
    cr = np.flatnonzero(b == _CR) if b"\r" in piece else ends[:0]
    if len(cr):
        lone = cr[(cr == len(b) - 1) | (b[np.minimum(cr + 1, len(b) - 1)] != _LF)]
        ends = np.union1d(ends, lone)
        starts = ends - ((b[ends] == _LF) & (ends > 0) & (b[np.maximum(ends - 1, 0)] == _CR))
    outside = np.flatnonzero(np.searchsorted(quotes, ends) % 2 == 0)
    row_start = np.concatenate(([0], ends[outside] + 1))
    row_end = np.concatenate((starts[outside], [len(b)]))
    line = first_line + np.concatenate(([0], outside + 1))
    length = row_end - row_start
    return _PieceRows(lines=line[length > 0], next_line=first_line + len(ends),
                      longest=int(length.max()), quoted_breaks=len(outside) < len(ends))


def _parse(piece: bytes, names: List[str], rows: _PieceRows) -> pa.Table:
    """Every row of `piece` as strings, exactly as written, but null for an empty value
    (so that a column of numbers and empty values converts to numbers at once)."""
    try:
        piece.decode("utf-8")
        table = pacsv.read_csv(
            pa.BufferReader(piece),
            read_options=pacsv.ReadOptions(column_names=names, block_size=max(
                _PARSE_BLOCK_BYTES, 4 * (rows.longest + 2))),
            parse_options=pacsv.ParseOptions(newlines_in_values=rows.quoted_breaks),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names}, strings_can_be_null=True,
                null_values=[""], quoted_strings_can_be_null=True, check_utf8=False))
    except (UnicodeDecodeError, pa.ArrowException) as e:
        raise FastPathDeclined(str(e)) from e
    if table.num_rows != len(rows.lines):
        raise FastPathDeclined("pyarrow and the line count disagree on the rows")
    limit = csv.field_size_limit()  # the csv module refuses values longer than `limit`
    if rows.longest >= limit and any(pc.max(pc.binary_length(c)).as_py() >= limit
                                     for c in table.columns):
        raise FastPathDeclined("a value as long as the csv module's field size limit")
    return table


def _rows_of_pieces(path: str, num_columns: int, piece_bytes: int
                    ) -> Iterator[Tuple[pa.Table, np.ndarray]]:
    """`(values, first line of each row)` per piece of `path`, the header row left out."""
    names = [f"c{i}" for i in range(num_columns)]
    next_line, header = 1, True
    for piece in _pieces(path, piece_bytes):
        if b"\0" in piece or piece.startswith(codecs.BOM_UTF8):
            raise FastPathDeclined("a NUL byte, or a BOM (kept by Python) pyarrow would drop")
        rows = _row_lines(piece, next_line)
        next_line = rows.next_line
        if not len(rows.lines):
            continue
        table, lines = _parse(piece, names, rows), rows.lines
        if header:
            if lines[0] != 1:
                raise FastPathDeclined("no header on the first line")
            table, lines, header = table.slice(1), lines[1:], False
        if len(lines):
            yield table, lines


def csv_blocks(lines: np.ndarray) -> List[Tuple[int, int]]:
    """The blocks of `csv_reader._iter_row_blocks`: rows on consecutive lines, at most
    `BATCH_SIZE` (a blank line or a row spanning lines ends a block)."""
    breaks = np.flatnonzero(lines[1:] != lines[:-1] + 1) + 1
    bounds = [0, *breaks.tolist(), len(lines)]
    return [(a, min(a + BATCH_SIZE, stop)) for start, stop in zip(bounds[:-1], bounds[1:])
            for a in range(start, stop, BATCH_SIZE)]


def iter_row_chunks(path: str, num_columns: int, piece_bytes: Optional[int] = None
                    ) -> Iterator[RowChunk]:
    """The data rows of a CSV file with `num_columns` columns, in the `csv` reader's blocks.

    Args:
      path: A local CSV file, plain or gzip.
      num_columns: Columns of its header.
      piece_bytes: Bytes read at a time (default `PIECE_BYTES`).

    Raises:
      FastPathDeclined: On anything only the `csv` module reader may judge.
    """
    carry: Optional[Tuple[pa.Table, np.ndarray]] = None
    for table, lines in _rows_of_pieces(path, num_columns, piece_bytes or PIECE_BYTES):
        if carry is not None:  # the last block of the previous piece may go on here
            table, lines = pa.concat_tables([carry[0], table]), np.concatenate([carry[1], lines])
        blocks = csv_blocks(lines)
        start, stop = blocks[-1]
        if stop - start < BATCH_SIZE:
            carry, blocks = (table.slice(start), lines[start:]), blocks[:-1]
        else:
            carry = None
        if blocks:
            stop = blocks[-1][1]
            yield RowChunk(table.slice(0, stop), lines[:stop], blocks)
    if carry is not None:
        yield RowChunk(carry[0], carry[1], csv_blocks(carry[1]))
