"""A string column that identifies rows is left out of the dataset, and said so; a user can
exclude any column (`exclude_columns`) or keep an identifier-like one (`keep_columns`).

Real CSV files, sharded by the local runner and by Apache Beam; the stored records are read
back with the reader side of the contract (`tf_features.parse_fn`).
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import numpy as np
import pytest

from kfdist.components.common import dataset_spec as ds  # first: kfdist selects legacy Keras
from kfdist.components.common import tf_features
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.shard_dataset import runtime
from kfdist.components.shard_dataset.categorical import (
    IDENTIFIER_MIN_ROWS, IDENTIFIER_SHARE, is_identifier)

import tensorflow as tf  # after kfdist (legacy Keras)

ROWS = 300


def write_table(path, rows: int = ROWS, seed: int = 0) -> str:
    """A CSV with a unique `id`, a 3-valued `colour`, a number `x` and a label of 3 classes."""
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["id", "colour", "x", "label"])
        for i in range(rows):
            out.writerow([f"user-{i:05d}", ["red", "green", "blue"][i % 3],
                          f"{rng.normal():.4f}", i % 3])
    return str(path)


def shard(source: str, out: str, **kwargs):
    lines = []
    meta = runtime.shard(source, out, num_shards=2, num_eval_shards=1, split="hash",
                         log=lines.append, **kwargs)
    return meta, lines


def stored_strings(root: str, meta: ds.DatasetMetadata) -> set:
    """Every value of the stored `categorical` feature, over both splits."""
    values = set()
    for split in ds.SPLITS:
        records = [r.numpy() for r in tf.data.TFRecordDataset(meta.shard_paths(root, split))]
        x, _ = tf_features.parse_fn(meta)(tf.constant(records))
        values |= {v.decode() for v in x[ds.CATEGORICAL_KEY].numpy().ravel()}
    return values


def test_the_rule_needs_nearly_all_values_distinct_and_enough_rows():
    assert is_identifier(IDENTIFIER_MIN_ROWS, IDENTIFIER_MIN_ROWS)
    assert is_identifier(int(np.ceil(IDENTIFIER_SHARE * 1000)), 1000)
    assert not is_identifier(int(np.ceil(IDENTIFIER_SHARE * 1000)) - 1, 1000)
    assert not is_identifier(IDENTIFIER_MIN_ROWS - 1, IDENTIFIER_MIN_ROWS - 1)  # too few rows


def test_an_id_column_is_left_out_and_said_so_an_ordinary_one_kept(tmp_path):
    root = str(tmp_path / "dataset")
    meta, lines = shard(write_table(tmp_path / "t.csv"), root)
    assert meta.feature.columns == ("x",) and meta.feature.categorical_columns == ("colour",)
    [excluded] = meta.excluded_columns
    assert (excluded.name, excluded.reason) == ("id", ds.IDENTIFIER)
    assert excluded.train_rows == meta.splits["train"].num_examples == excluded.distinct_values
    assert [set(v) for v in meta.preprocessing.vocabularies] == [{"red", "green", "blue"}]
    assert stored_strings(root, meta) == {"red", "green", "blue"}  # no id in any record
    said = [line for line in lines if line.startswith("column 'id'")]
    assert said == [excluded.describe()] and "an identifier, not a feature; excluded" in said[0]
    assert ds.load_metadata(root).excluded_columns == meta.excluded_columns  # in metadata.json


def test_a_small_table_keeps_its_string_columns(tmp_path):
    meta, _ = shard(write_table(tmp_path / "t.csv", rows=IDENTIFIER_MIN_ROWS), str(tmp_path / "d"))
    assert meta.splits["train"].num_examples < IDENTIFIER_MIN_ROWS
    assert meta.feature.categorical_columns == ("id", "colour") and not meta.excluded_columns


def test_keep_columns_keeps_an_identifier(tmp_path):
    root = str(tmp_path / "dataset")
    meta, lines = shard(write_table(tmp_path / "t.csv"), root, keep_columns=["id"])
    assert meta.feature.categorical_columns == ("id", "colour") and not meta.excluded_columns
    assert "user-00007" in stored_strings(root, meta) | set(meta.preprocessing.vocabularies[0])
    assert not any("an identifier" in line for line in lines)


def test_exclude_columns_drops_any_column_and_records_it(tmp_path):
    root = str(tmp_path / "dataset")
    meta, lines = shard(write_table(tmp_path / "t.csv"), root, exclude_columns=["x"])
    assert meta.feature.columns == () and meta.feature.categorical_columns == ("colour",)
    assert [(c.name, c.reason) for c in meta.excluded_columns] == [
        ("x", ds.REQUESTED), ("id", ds.IDENTIFIER)]
    assert "column 'x': excluded as requested (--exclude-columns)" in lines
    assert ds.model_input_shape(meta) == (3 + 1,)  # colour's one-hot block only


def test_excluding_every_feature_but_an_identifier_is_refused(tmp_path):
    with pytest.raises(InvalidInputError, match="no feature column is left: column 'id'"):
        shard(write_table(tmp_path / "t.csv"), str(tmp_path / "d"), exclude_columns=["x", "colour"])
    assert not os.path.exists(tmp_path / "d")


@pytest.mark.parametrize("kwargs, message", [
    ({"exclude_columns": ["nope"]},
     "exclude_columns names 'nope', which is not a column of the source; its feature columns "
     "are ['id', 'colour', 'x']"),
    ({"exclude_columns": ["label"]}, "exclude_columns names the label column 'label'"),
    ({"keep_columns": ["nope"]}, "keep_columns names 'nope', which is not a feature column"),
    ({"exclude_columns": ["id"], "keep_columns": ["id"]},
     "both in exclude_columns and keep_columns"),
])
def test_bad_column_names_are_refused_before_anything_is_written(tmp_path, kwargs, message):
    with pytest.raises(InvalidInputError) as err:
        shard(write_table(tmp_path / "t.csv"), str(tmp_path / "d"), **kwargs)
    assert message in str(err.value)
    assert sorted(os.listdir(tmp_path)) == ["t.csv"]


def test_beam_leaves_out_the_same_columns_and_writes_the_same_records(tmp_path):
    source = write_table(tmp_path / "t.csv")
    local, _ = shard(source, str(tmp_path / "local"))
    beam, lines = shard(source, str(tmp_path / "beam"), runner="beam",
                        beam_options=("direct_running_mode=in_memory", "direct_num_workers=1"))
    assert beam.excluded_columns == local.excluded_columns and beam.feature == local.feature
    assert beam.preprocessing == local.preprocessing
    assert local.excluded_columns[0].describe() in lines
    for split in ds.SPLITS:
        read = [sorted(r.numpy() for r in tf.data.TFRecordDataset(meta.shard_paths(root, split)))
                for meta, root in ((local, tmp_path / "local"), (beam, tmp_path / "beam"))]
        assert read[0] == read[1]


def run_kfdist(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfdist", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("args, named", [
    (("--exclude-columns", "nope"), "'nope', which is not a column of the source; its feature "
                                    "columns are ['id', 'colour', 'x']"),
    (("--exclude-columns", "x,label"), "the label column 'label'"),
    (("--keep-columns", "colour,nope"), "--keep-columns names 'nope'"),
    (("--exclude-columns", "x,"), "'x,' is not a comma-separated list of column names"),
])
def test_kfdist_run_refuses_bad_columns_in_one_line(tmp_path, args, named):
    source = write_table(tmp_path / "t.csv")
    proc = run_kfdist("run", "tabular", "--data", source, "--output", "out", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kfdist:")]
    assert len(errors) == 1 and errors[0].startswith("kfdist: invalid input: "), proc.stderr
    assert named in errors[0] and "Traceback" not in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["t.csv"]


def test_kfdist_run_refuses_columns_for_a_pipeline_without_columns(tmp_path):
    proc = run_kfdist("run", "mnist", "--output", "out", "--exclude-columns", "id", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "kfdist: invalid input: --exclude-columns id: the mnist pipeline has no columns to "
        "choose; it applies to the tabular pipeline")
    assert os.listdir(tmp_path) == []
