"""A missing cell is missing in a string column as in a numeric one (`MISSING_VALUES`).

On the Palmer penguins table, where 11 of the 344 penguins have `sex` `NA` (and 2 have `NA`
numbers): the statistics count those cells missing and list no `NA` value, the vocabulary
learnt for `sex` holds the two sexes only, and the preprocessing that training, evaluation and
serving share sets no slot of the `sex` block for a missing cell, whichever way it is spelled,
where a value the train split never had sets the unknown slot.
"""

from __future__ import annotations

import collections
import csv

import numpy as np
import pytest

from kfdist.components.common import dataset_spec as ds  # first: kfdist selects legacy Keras
from kfdist.components.common import tf_features
from kfdist.components.common.dataset_statistics import load_statistics
from kfdist.components.shard_dataset import runtime
from kfdist.sample_data import TABULAR_LABEL_COLUMN, penguins_csv_path

import tensorflow as tf  # after kfdist (legacy Keras)


@pytest.fixture(scope="module")
def penguins(tmp_path_factory):
    """`(the source's rows, the sharded dataset's root, its metadata)`."""
    with open(penguins_csv_path(), newline="") as f:
        rows = list(csv.DictReader(f))
    root = str(tmp_path_factory.mktemp("penguins") / "dataset")
    meta = runtime.shard(penguins_csv_path(), root, label_column=TABULAR_LABEL_COLUMN,
                         log=lambda line: None)
    return rows, root, meta


def test_the_statistics_and_the_vocabulary_leave_missing_cells_out_alike(penguins):
    rows, root, meta = penguins
    in_source = collections.Counter(row["sex"] for row in rows)
    assert in_source == {"male": 168, "female": 165, "NA": 11}
    sex = next(c for c in load_statistics(root).columns if c.name == "sex")
    assert (sex.rows, sex.missing, sex.distinct_values) == (344, 11, 2)
    assert sex.value_counts == {"male": 168, "female": 165} and sex.other_count == 0
    vocabulary = meta.preprocessing.vocabularies[meta.feature.categorical_columns.index("sex")]
    assert sorted(vocabulary) == ["female", "male"]
    mass = next(c for c in load_statistics(root).columns if c.name == "body_mass_g")
    assert mass.missing == sum(row["body_mass_g"] == "NA" for row in rows) == 2


def test_a_missing_string_sets_no_slot_of_its_one_hot_block(penguins):
    _, _, meta = penguins
    strings = meta.feature.categorical_columns
    numbers = len(meta.feature.columns)
    sexes = ["NA", "", "null", "female", "male", "unrecorded"]
    raw = {ds.FEATURES_KEY: tf.zeros([len(sexes), numbers]),
           ds.CATEGORICAL_KEY: tf.constant([[sex if c == "sex" else "Biscoe" for c in strings]
                                            for sex in sexes])}
    model_input = tf_features.preprocess_fn(meta)(raw).numpy()
    widths = [len(v) + 1 for v in meta.preprocessing.vocabularies]
    start = numbers + sum(widths[:strings.index("sex")])
    block = model_input[:, start:start + widths[strings.index("sex")]]
    assert block.sum(axis=1).tolist() == [0, 0, 0, 1, 1, 1]
    assert block[:, -1].tolist() == [0, 0, 0, 0, 0, 1]  # the unknown slot: a value never seen
    assert np.isfinite(model_input).all()
