"""The shard step's CSV reader against the library readers that would replace it.

The shard step's reader (`csv_reader`: pyarrow's streaming reader, falling back
to the `csv` module) and its `csv`-module path alone against
`pyarrow.csv.open_csv` streaming and pandas `read_csv` in chunks, each
producing the float32 feature matrix and the string columns of every row, best
of `repeats.REPEATS` (alternating). kfdist's reader reads every file twice (the
profile of column kinds and classes, then the rows, checked); its read pass
alone is timed too, against the single pass of the library loops, which check
nothing. Part of `library_paths`.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List

import numpy as np

from benchmarks.common import write_synthetic_csv
from benchmarks.repeats import best_times


def _open_kfdist(files: List[str], columnar: bool = True):
    from kfdist.components.shard_dataset.csv_reader import open_csv_source
    from kfdist.components.shard_dataset.source import ReaderOptions

    return open_csv_source(files, ReaderOptions(label_column="label"), columnar=columnar)


def _rows_of(source) -> int:
    return sum(len(batch.labels) for batch in source.batches())


def _read_pyarrow(files: List[str]) -> int:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    rows = 0
    for path in files:
        reader = pcsv.open_csv(path, read_options=pcsv.ReadOptions(block_size=8 << 20))
        for batch in reader:
            table = pa.Table.from_batches([batch])
            strings = [table.column(c).to_numpy(zero_copy_only=False) for c in ("color", "size")]
            numbers = np.stack([table.column(c).to_numpy(zero_copy_only=False).astype(np.float32)
                                for c in table.column_names if c.startswith("x")], axis=1)
            rows += len(numbers) + 0 * len(strings)
    return rows


def _read_pandas(files: List[str]) -> int:
    import pandas as pd

    rows = 0
    for path in files:
        for frame in pd.read_csv(path, chunksize=100_000):
            strings = frame[["color", "size"]].to_numpy().astype(str)
            numbers = frame[[c for c in frame.columns if c.startswith("x")]].to_numpy(np.float32)
            rows += len(numbers) + 0 * len(strings)
    return rows


def measure_csv(num_bytes: int, root: str) -> Dict[str, Any]:
    """Every row of a generated CSV into float32 features and string columns, five ways."""
    table = write_synthetic_csv(os.path.join(root, "csv"), num_bytes, parts=2)
    files = sorted(os.path.join(root, "csv", name) for name in os.listdir(os.path.join(root, "csv")))
    counts = {}

    def run(name, fn):
        def go():
            counts[name] = fn()
        return go

    opened = _open_kfdist(files)
    seconds = best_times({
        "kfdist": run("kfdist", lambda: _rows_of(_open_kfdist(files))),
        "kfdist_read_pass": run("kfdist_read_pass", lambda: _rows_of(opened)),
        "kfdist_csv_module": run("kfdist_csv_module", lambda: _rows_of(_open_kfdist(files, False))),
        "pyarrow_open_csv": run("pyarrow_open_csv", lambda: _read_pyarrow(files)),
        "pandas_chunks": run("pandas_chunks", lambda: _read_pandas(files))})
    assert len(set(counts.values())) == 1, f"row counts differ: {counts}"
    return {"rows": table["rows"], "megabytes": round(table["bytes"] / 1e6, 1), "seconds": seconds,
            "kfdist_read_over_pyarrow": round(
                seconds["pyarrow_open_csv"] / seconds["kfdist_read_pass"], 2),
            "kfdist_read_over_pandas": round(
                seconds["pandas_chunks"] / seconds["kfdist_read_pass"], 2),
            "kfdist_over_csv_module": round(
                seconds["kfdist_csv_module"] / seconds["kfdist"], 2)}
