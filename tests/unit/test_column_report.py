"""The shard step says what became of every column of a table, and warns of a string column
that nearly identifies rows; `kfdist run`'s console shows it under the shard step's figure.

Real CSV files sharded by the shard step's runtime; the console lines come from the Dataset
artifact's metadata as `kfdist run` reads it (`step_figures`).
"""

from __future__ import annotations

import pytest

from kfdist.components.common.class_counts import label_lines, label_record
from kfdist.components.shard_dataset import data_check, runtime
from kfdist.components.shard_dataset.column_report import (
    NEAR_IDENTIFIER_MIN_VALUES, NEAR_IDENTIFIER_SHARE, explain_columns, is_near_identifier)
from kfdist.step_figures import SHARD_DETAIL_INDENT, step_figure
from tests.unit.test_split_independence import ROWS, write_table


def shard(tmp_path, name, **kwargs):
    lines = []
    out = str(tmp_path / name)
    meta = runtime.shard(write_table(tmp_path / "cars.csv"), out, num_shards=2, split="hash",
                         log=lines.append, **kwargs)
    return meta, lines, out


def test_the_rule():
    assert is_near_identifier(NEAR_IDENTIFIER_MIN_VALUES, NEAR_IDENTIFIER_MIN_VALUES)
    assert not is_near_identifier(NEAR_IDENTIFIER_MIN_VALUES - 1, NEAR_IDENTIFIER_MIN_VALUES - 1)
    assert is_near_identifier(500, int(500 / NEAR_IDENTIFIER_SHARE))
    assert not is_near_identifier(500, int(500 / NEAR_IDENTIFIER_SHARE) + 1)


def test_every_column_is_explained_and_a_near_identifier_warned_of(tmp_path):
    meta, lines, _ = shard(tmp_path, "all")
    said = explain_columns(meta)
    train = meta.splits["train"].num_examples
    [names] = [len(v) for c, v in zip(meta.feature.categorical_columns,
                                      meta.preprocessing.vocabularies) if c == "name"]
    assert 0.5 * train <= names < 0.9 * train  # kept, but nearly an identifier
    assert said[:2] == [line for line in said if "numeric, standardised" in line]
    assert [line.split(":")[0] for line in said[:4]] == [
        "column 'row'", "column 'x'", "column 'name'", "column 'colour'"]
    assert said[2] == (f"column 'name': categorical, {names} values in the train split, one-hot "
                       f"of {names + 1} (with one for unknown values)")
    assert said[3].startswith("column 'colour': categorical, 3 values")
    assert said[4] == (
        f"warning: column 'name' is nearly an identifier: {names} distinct values in {train} "
        f"train rows ({names / train:.0%}) became a {names + 1}-way one-hot a model can memorise "
        "the train rows by (held-out accuracy may fall as epochs rise); leave it out with "
        "--exclude-columns name")
    assert len(said) == 5
    assert said[4] in lines and said[0] in lines  # the step's log says it


@pytest.mark.parametrize("kwargs, last", [
    ({"exclude_columns": ["name"]},
     "column 'name': excluded as requested (--exclude-columns)"),
    ({"keep_columns": ["name"]}, "column 'colour': categorical, 3 values in the train split, "
                                 "one-hot of 4 (with one for unknown values)"),
])
def test_no_warning_once_the_user_chose(tmp_path, kwargs, last):
    meta, lines, _ = shard(tmp_path, "chosen", **kwargs)
    said = explain_columns(meta, keep_columns=kwargs.get("keep_columns", ()))
    assert said[-1] == last
    assert not [line for line in said + lines if "nearly an identifier" in line]


def test_the_console_shows_the_columns_under_the_shard_step(tmp_path):
    meta, _, out = shard(tmp_path, "all")
    metadata = data_check.artifact_summary(out, meta, str(tmp_path / "report.html"))
    metadata.update(train_examples=meta.splits["train"].num_examples,
                    eval_examples=meta.splits["eval"].num_examples, train_shards=2, split="hash")
    shown = step_figure("shard", {"dataset": metadata}).split("\n")
    assert shown[0].startswith(f"{ROWS:,} examples written")
    label = label_lines(label_record(meta))
    assert label[0].startswith("label 'label': ") and len(label) == 1  # no warning
    assert shown[1:] == [SHARD_DETAIL_INDENT + line for line in explain_columns(meta) + label]
