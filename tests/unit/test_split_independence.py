"""Which rows of a table are held out does not depend on which columns are read.

A table's row is hashed by its file's name and its position among the file's
data rows (`scan.row_keys`), so leaving a column out (`exclude_columns`), an
identifier being dropped or kept (`keep_columns`) and the reading path (pyarrow
or the `csv` module) all hold out the same rows: two feature sets are compared
on the same examples. Real CSV files, sharded; the stored records are read
back with the reader side of the contract (`tf_features.parse_fn`).
"""

from __future__ import annotations

import csv
import hashlib

import numpy as np
import pytest

from kfdist.components.common import dataset_spec as ds  # first: kfdist selects legacy Keras
from kfdist.components.common import tf_features
from kfdist.components.shard_dataset import csv_reader, runtime, scan
from kfdist.components.shard_dataset.source import ReaderOptions

import tensorflow as tf  # after kfdist (legacy Keras)

ROWS = 406  # as many as the cars table whose held-out rows moved when `Name` was left out


def write_table(path) -> str:
    """`row` (its number), `name` (nearly unique strings), `colour`, `x` and a 3-class label."""
    rng = np.random.default_rng(7)
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["row", "name", "colour", "x", "label"])
        for i in range(ROWS):
            out.writerow([i, f"car {rng.integers(0, 320)}", ["red", "green", "blue"][i % 3],
                          f"{rng.normal():.4f}", i % 3])
    return str(path)


def held_out_rows(source: str, out: str, **kwargs) -> list:
    """The `row` numbers of the eval split of `source` sharded with `kwargs`."""
    meta = runtime.shard(source, out, num_shards=2, num_eval_shards=1, split="hash",
                         log=lambda _: None, **kwargs)
    records = [r.numpy() for r in tf.data.TFRecordDataset(meta.shard_paths(out, "eval"))]
    x, _ = tf_features.parse_fn(meta)(tf.constant(records))
    column = meta.feature.columns.index("row")
    return sorted(int(v) for v in x[ds.FEATURES_KEY].numpy()[:, column])


def test_leaving_columns_out_holds_out_the_same_rows(tmp_path):
    source = write_table(tmp_path / "cars.csv")
    every = held_out_rows(source, str(tmp_path / "all"))
    assert 0.1 * ROWS < len(every) < 0.3 * ROWS
    for n, kwargs in enumerate([{"exclude_columns": ["name"]},
                                {"exclude_columns": ["colour", "x"]},
                                {"keep_columns": ["name"]},
                                {"exclude_columns": ["name"], "runner": "beam"}]):
        assert held_out_rows(source, str(tmp_path / f"other-{n}"), **kwargs) == every, kwargs


def test_a_row_key_is_its_files_name_and_position(tmp_path):
    source = write_table(tmp_path / "cars.csv")
    keys = []
    for columnar in (True, False):  # the pyarrow path and the `csv` module path
        opened = csv_reader.open_csv_source([source], ReaderOptions(), columnar=columnar)
        keys.append([k for batch in opened.batches() for k in scan.example_keys(batch)])
    want = [hashlib.blake2b(b"cars.csv\0" + i.to_bytes(8, "little", signed=True),
                            digest_size=8).digest() for i in range(ROWS)]
    assert keys == [want, want]
    assert scan.row_keys(str(tmp_path / "cars.csv.gz"), 5, 2) == want[5:7]


@pytest.mark.parametrize("fraction", [0.2, 0.5])
def test_row_keys_hold_out_the_asked_share(fraction):
    keys = np.frombuffer(b"".join(scan.row_keys("t.csv", 0, 20_000)), dtype="<u8")
    share = float(np.mean(keys % scan.SPLIT_BUCKETS < scan.eval_threshold(fraction)))
    assert abs(share - fraction) < 0.015
