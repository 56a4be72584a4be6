"""CSV tables with numeric, string (categorical) and missing values: real files, real TensorFlow.

The shards are read back with the reader side of the contract
(`tf_features.parse_fn`) and compared with the source rows read independently
with the `csv` module; every stored record is compared byte for byte with a
`tf.train.Example` built from its row.
"""

from __future__ import annotations

import collections
import csv
import math
import os

import numpy as np
import pytest

from kfdist.components.common import dataset_spec as ds  # first: kfdist selects legacy Keras
from kfdist.components.common import serving_inputs, tf_features
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.shard_dataset import runtime
from kfdist.components.shard_dataset.csv_columns import MISSING_VALUES

import tensorflow as tf  # after kfdist (legacy Keras)


def quiet(_message: str) -> None:
    """A `log` that drops progress messages."""


# ----------------------------------------------------------------------------- helpers


def write_csv(path, header, rows) -> str:
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return str(path)


def read_csv(path):
    """`(header, rows)` of a CSV file, read with the `csv` module."""
    with open(path, newline="", encoding="utf-8") as f:
        lines = [row for row in csv.reader(f) if row]
    return lines[0], lines[1:]


def number(cell: str) -> float:
    """A numeric cell as float32 (NaN for a missing value)."""
    return float("nan") if cell.strip() in MISSING_VALUES else float(np.float32(float(cell)))


def source_examples(path, numeric, categorical, label, class_names=None):
    """Each source row as `(float32 values, strings, label id)`, in file order."""
    header, rows = read_csv(path)
    out = []
    for row in rows:
        cell = dict(zip(header, row))
        values = np.array([number(cell[c]) for c in numeric], np.float32)
        strings = tuple(cell[c] for c in categorical)
        y = class_names.index(cell[label]) if class_names else int(cell[label])
        out.append((values, strings, y))
    return out


def key(values: np.ndarray, strings, y) -> tuple:
    """A hashable form of an example (NaN compares equal to NaN here)."""
    return (tuple("nan" if math.isnan(v) else float(v) for v in values.tolist()),
            tuple(strings), int(y))


def canonical_bytes(values: np.ndarray, strings, y) -> bytes:
    """The example a row should become, built with protobuf, deterministically serialised."""
    feature = {
        ds.FEATURES_KEY: tf.train.Feature(float_list=tf.train.FloatList(value=values.tolist())),
        ds.LABEL_KEY: tf.train.Feature(int64_list=tf.train.Int64List(value=[int(y)])),
    }
    if strings:
        feature[ds.CATEGORICAL_KEY] = tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[s.encode("utf-8") for s in strings]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
        deterministic=True)


def stored_records(root: str, meta: ds.DatasetMetadata, split: str):
    """The serialized records of a split, as bytes."""
    data = tf.data.TFRecordDataset(meta.shard_paths(root, split), tf_features.compression_type(meta))
    return [r.numpy() for r in data]


def read_back(root: str, meta: ds.DatasetMetadata, split: str):
    """Every example of a split parsed with `parse_fn`: `[(float32 values, strings, label)]`."""
    records = stored_records(root, meta, split)
    if not records:
        return []
    x, y = tf_features.parse_fn(meta)(tf.constant(records))
    if meta.feature.categorical_columns:
        values, strings = x[ds.FEATURES_KEY].numpy(), x[ds.CATEGORICAL_KEY].numpy()
    else:
        values, strings = x.numpy(), np.empty((len(records), 0), object)
    assert values.dtype == np.float32 and values.shape == (len(records), *meta.feature.shape)
    return [(v, tuple(s.decode("utf-8") for s in row), int(label))
            for v, row, label in zip(values, strings, y.numpy())]


def assert_nothing_written(output_dir: str) -> None:
    """Neither `output_dir` nor a temporary directory beside it exists."""
    assert not os.path.exists(output_dir)
    parent, name = os.path.split(output_dir.rstrip(os.sep))
    assert not [n for n in os.listdir(parent) if n.startswith(name + ".tmp-")]


# ----------------------------------------------------------------------------- the mixed table

HEADER = ["sepal length (cm)", "colour", "species", "weight", "size"]
NUMERIC = ("sepal length (cm)", "weight")
CATEGORICAL = ("colour", "size")
SPECIES = ("adelie", "chinstrap", "gentoo")


def mixed_rows(n: int = 240):
    """Rows with numbers (negative, exponent, several spellings of missing), strings (quoted
    commas, non-ASCII, missing as empty and as "NA") and class-name labels. Every fifth colour is
    unique to its row, so some values occur in the eval split only."""
    rng = np.random.default_rng(7)
    missing = ["", "NA", "?", "nan", "null"]
    colours = ["red", "green", "dark, blue", "café"]
    sizes = ["S", "M", "L", "", "NA"]
    rows = []
    for i in range(n):
        length = missing[i % 5] if i % 6 == 0 else f"{rng.normal(5.0, 2.0):.4f}"
        weight = "1.5e3" if i % 17 == 0 else ("?" if i % 11 == 0 else str(int(rng.integers(-40, 90))))
        colour = f"rare-{i:03d}" if i % 5 == 0 else colours[int(rng.integers(0, 4))]
        rows.append([length, colour, SPECIES[int(rng.integers(0, 3))], weight,
                     sizes[int(rng.integers(0, 5))]])
    return rows


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """`(source path, dataset root, metadata)` of the mixed table, hash-split."""
    tmp = tmp_path_factory.mktemp("mixed")
    source = write_csv(tmp / "table.csv", HEADER, mixed_rows())
    root = str(tmp / "dataset")
    meta = runtime.shard(source, root, label_column="species", num_shards=2, num_eval_shards=1,
                         split="hash", log=quiet)
    return source, root, meta


def test_feature_spec_lists_numeric_and_string_columns_in_file_order(mixed):
    _, _, meta = mixed
    assert meta.source_format == "csv" and meta.split == ds.HASH_SPLIT
    assert meta.feature == ds.FeatureSpec(key=ds.FEATURES_KEY, dtype="float32", shape=(2,),
                                          columns=NUMERIC, categorical_columns=CATEGORICAL)
    assert meta.class_names == SPECIES and meta.num_classes == 3
    assert meta.splits["train"].num_examples + meta.splits["eval"].num_examples == 240
    assert meta.splits["eval"].num_examples > 0
    assert len(meta.splits["train"].shards) == 2 and len(meta.splits["eval"].shards) == 1
    # The metadata file round-trips, vocabularies and categorical columns included.
    assert ds.load_metadata(mixed[1]) == meta


def test_stored_records_equal_the_source_rows(mixed):
    source, root, meta = mixed
    want = collections.Counter(key(*e) for e in source_examples(
        source, NUMERIC, CATEGORICAL, "species", list(SPECIES)))
    got = collections.Counter(key(*e) for split in ds.SPLITS for e in read_back(root, meta, split))
    assert got == want
    # Missing numbers are stored as NaN, missing strings as written ("NA", "").
    assert any(k[0][0] == "nan" for k in got) and any(k[0][1] == "nan" for k in got)
    assert any(k[1][1] == "NA" for k in got) and any(k[1][1] == "" for k in got)
    assert any(k[1][0] == "dark, blue" for k in got) and any(k[1][0] == "café" for k in got)
    assert any(k[0][1] == 1500.0 for k in got)


def test_every_record_is_byte_identical_to_a_deterministic_tf_example(mixed):
    source, root, meta = mixed
    want = collections.Counter(canonical_bytes(*e) for e in source_examples(
        source, NUMERIC, CATEGORICAL, "species", list(SPECIES)))
    got = collections.Counter(r for split in ds.SPLITS for r in stored_records(root, meta, split))
    assert sum(got.values()) == 240
    assert got == want


def test_vocabularies_come_from_the_train_split_most_frequent_first(mixed):
    _, root, meta = mixed
    train, evaluation = read_back(root, meta, "train"), read_back(root, meta, "eval")
    vocabularies = meta.preprocessing.vocabularies
    assert vocabularies is not None and len(vocabularies) == len(CATEGORICAL)
    for column in range(len(CATEGORICAL)):
        counts = collections.Counter(strings[column] for _, strings, _ in train
                                     if strings[column] not in MISSING_VALUES)
        ranked = tuple(v for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        assert vocabularies[column] == ranked
    # A missing size ("NA" or empty, both in the train split) is no value of the vocabulary.
    assert {"NA", ""} <= {strings[1] for _, strings, _ in train}
    assert vocabularies[1] == tuple(sorted(("S", "M", "L"), key=lambda v: (
        -sum(strings[1] == v for _, strings, _ in train), v)))
    colours = collections.Counter(strings[0] for _, strings, _ in train)
    # The data exercises both rules: ties (the rare colours, once each) are ordered by value,
    # and colours seen only in eval rows are left out.
    assert sum(1 for c in colours.values() if c == 1) >= 2
    eval_only = {strings[0] for _, strings, _ in evaluation} - set(colours)
    assert eval_only, "the data should put some rare colour into eval only"
    assert not eval_only & set(vocabularies[0])
    assert vocabularies[0][:4] == tuple(sorted(("red", "green", "dark, blue", "café"),
                                               key=lambda v: (-colours[v], v)))


def test_mean_and_std_are_the_train_split_statistics_ignoring_missing_values(mixed):
    _, root, meta = mixed
    train = np.stack([values for values, _, _ in read_back(root, meta, "train")]).astype(np.float64)
    assert np.isnan(train).any(axis=0).all(), "both numeric columns have missing train values"
    pre = meta.preprocessing
    assert pre.kind == "standardize"
    np.testing.assert_allclose(pre.mean, np.nanmean(train, axis=0), rtol=1e-6)
    np.testing.assert_allclose(pre.std, np.nanstd(train, axis=0), rtol=1e-6)
    everything = np.stack([values for split in ds.SPLITS
                           for values, _, _ in read_back(root, meta, split)]).astype(np.float64)
    assert not np.allclose(pre.mean, np.nanmean(everything, axis=0), rtol=1e-9, atol=0)


def expected_model_input(meta: ds.DatasetMetadata, values: np.ndarray, strings) -> np.ndarray:
    """Standardised numbers (0 where missing), then one one-hot block per string column (all
    zeros where missing)."""
    pre = meta.preprocessing
    z = (values.astype(np.float64) - np.array(pre.mean)) / np.array(pre.std)
    parts = [np.where(np.isnan(values), 0.0, z)]
    for value, vocabulary in zip(strings, pre.vocabularies):
        block = np.zeros(len(vocabulary) + 1)
        if value not in MISSING_VALUES:
            block[vocabulary.index(value) if value in vocabulary else len(vocabulary)] = 1.0
        parts.append(block)
    return np.concatenate(parts)


def test_preprocess_standardises_numbers_and_one_hot_encodes_strings(mixed):
    _, root, meta = mixed
    pre = meta.preprocessing
    width = ds.model_input_shape(meta)
    assert width == (2 + sum(len(v) + 1 for v in pre.vocabularies),)
    rows = [(np.array([np.nan, 12.0], np.float32), ("red", "M")),
            (np.array([4.5, np.nan], np.float32), ("never seen", "")),
            (np.array([np.nan, np.nan], np.float32), (pre.vocabularies[0][-1], "also unknown")),
            (np.array([1.0, 2.0], np.float32), ("NA", "NA"))]
    raw = {ds.FEATURES_KEY: tf.constant(np.stack([v for v, _ in rows])),
           ds.CATEGORICAL_KEY: tf.constant([list(s) for _, s in rows])}
    got = tf_features.preprocess_fn(meta)(raw).numpy()
    assert got.dtype == np.float32 and got.shape == (4, *width)
    assert not np.isnan(got).any()
    want = np.stack([expected_model_input(meta, v, s) for v, s in rows])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    n_colours = len(pre.vocabularies[0])
    assert got[0, 0] == 0.0 and got[1, 1] == 0.0 and (got[2, :2] == 0.0).all()  # missing → 0
    assert got[1, 2 + n_colours] == 1.0 and got[1, 2:2 + n_colours].sum() == 0  # unknown slot
    assert got[2, -1] == 1.0 and got[2, -len(pre.vocabularies[1]) - 1:-1].sum() == 0
    assert got[2, 2 + n_colours - 1] == 1.0  # the rarest known colour, not unknown
    # One hot per string column with a value; none, not the unknown slot, for a missing one.
    assert got[:, 2:].sum(axis=1).tolist() == [2, 1, 2, 0]
    assert got[1, 2 + n_colours + 1:].sum() == 0 and got[3, 2:].sum() == 0
    # The same on records read back with parse_fn (a batch of serialized examples).
    records = stored_records(root, meta, "eval")
    x, _ = tf_features.parse_fn(meta)(tf.constant(records))
    parsed = tf_features.preprocess_fn(meta)(x).numpy()
    want = np.stack([expected_model_input(meta, v, s) for v, s, _ in read_back(root, meta, "eval")])
    np.testing.assert_allclose(parsed, want, rtol=1e-5, atol=1e-6)


def test_serving_inputs_follow_the_columns_and_give_the_parsed_raw_input(mixed):
    _, root, meta = mixed
    inputs = serving_inputs.serving_inputs(meta)
    assert [(i.name, i.kind, i.dtype, i.column) for i in inputs] == [
        ("sepal_length__cm_", "numeric", "float32", "sepal length (cm)"),
        ("weight", "numeric", "float32", "weight"),
        ("colour", "categorical", "string", "colour"),
        ("size", "categorical", "string", "size")]
    assert all(i.shape == (None,) for i in inputs)
    signature = tf_features.serving_signature(meta)
    assert sorted(signature) == sorted(i.name for i in inputs)
    assert signature["sepal_length__cm_"].dtype == tf.float32
    assert signature["colour"].dtype == tf.string
    examples = read_back(root, meta, "eval")
    given = {"sepal_length__cm_": tf.constant([v[0] for v, _, _ in examples]),
             "weight": tf.constant([v[1] for v, _, _ in examples]),
             "colour": tf.constant([s[0] for _, s, _ in examples]),
             "size": tf.constant([s[1] for _, s, _ in examples])}
    raw = tf_features.raw_from_serving(meta)(given)
    x, _ = tf_features.parse_fn(meta)(tf.constant(stored_records(root, meta, "eval")))
    np.testing.assert_array_equal(raw[ds.FEATURES_KEY].numpy(), x[ds.FEATURES_KEY].numpy())
    np.testing.assert_array_equal(raw[ds.CATEGORICAL_KEY].numpy(), x[ds.CATEGORICAL_KEY].numpy())


def test_with_predefined_splits_the_test_file_never_reaches_vocabularies_or_statistics(tmp_path):
    source = tmp_path / "src"
    write_csv(source / "train.csv", ["x", "colour", "label"],
              [["1", "red", "0"], ["", "blue", "1"], ["3", "red", "0"], ["5", "blue", "1"],
               ["NA", "amber", "0"], ["7", "red", "1"]])
    write_csv(source / "test.csv", ["x", "colour", "label"],
              [["1000", "green", "0"], ["-1000", "green", "1"], ["2", "red", "0"]])
    root = str(tmp_path / "dataset")
    meta = runtime.shard(str(source), root, num_shards=1, num_eval_shards=1, log=quiet)
    assert meta.split == ds.PREDEFINED_SPLIT
    assert meta.split_files == {"train": ("train.csv",), "eval": ("test.csv",)}
    assert meta.preprocessing.vocabularies == (("red", "blue", "amber"),)
    train_x = np.array([1, 3, 5, 7], np.float64)
    assert meta.preprocessing.mean == pytest.approx((train_x.mean(),))
    assert meta.preprocessing.std == pytest.approx((train_x.std(),))
    got = tf_features.preprocess_fn(meta)(
        {ds.FEATURES_KEY: tf.constant([[np.nan]], tf.float32),
         ds.CATEGORICAL_KEY: tf.constant([["green"]])}).numpy()
    np.testing.assert_array_equal(got, [[0.0, 0.0, 0.0, 0.0, 1.0]])  # green: the unknown slot


def test_a_vocabulary_keeps_the_most_frequent_values_up_to_the_limit(tmp_path, monkeypatch):
    from kfdist.components.shard_dataset import categorical

    monkeypatch.setattr(categorical, "MAX_VOCABULARY", 3)
    counts = {"e": 1, "d": 2, "c": 3, "b": 3, "a": 5}
    rows = [[str(i), value, str(i % 2)] for value, n in counts.items() for i in range(n)]
    source = tmp_path / "src"
    write_csv(source / "train.csv", ["x", "letter", "label"], rows)
    write_csv(source / "eval.csv", ["x", "letter", "label"], [["0", "z", "0"]])
    lines = []
    meta = runtime.shard(str(source), str(tmp_path / "dataset"), num_shards=1,
                         num_eval_shards=1, log=lines.append)
    assert meta.preprocessing.vocabularies == (("a", "b", "c"),)
    assert ds.model_input_shape(meta) == (1 + 3 + 1,)
    assert any("'letter' has 5 distinct values" in line for line in lines), lines


# ----------------------------------------------------------------------------- strings only


def test_a_table_of_string_columns_only_shards_and_parses(tmp_path):
    rng = np.random.default_rng(3)
    rows = [[["x", "y", "z"][int(rng.integers(0, 3))], str(i % 3),
             ["up", "down", "NA", ""][int(rng.integers(0, 4))]] for i in range(90)]
    source = write_csv(tmp_path / "strings.csv", ["kind", "label", "way"], rows)
    root = str(tmp_path / "dataset")
    meta = runtime.shard(source, root, num_shards=2, num_eval_shards=1, split="hash", log=quiet)
    assert meta.feature == ds.FeatureSpec(key=ds.FEATURES_KEY, dtype="float32", shape=(0,),
                                          columns=(), categorical_columns=("kind", "way"))
    assert meta.class_names is None and meta.num_classes == 3
    examples = source_examples(source, (), ("kind", "way"), "label")
    got = collections.Counter(key(*e) for split in ds.SPLITS for e in read_back(root, meta, split))
    assert got == collections.Counter(key(*e) for e in examples)
    records = collections.Counter(r for split in ds.SPLITS for r in stored_records(root, meta, split))
    assert records == collections.Counter(canonical_bytes(*e) for e in examples)
    vocabularies = meta.preprocessing.vocabularies
    assert set(vocabularies[0]) <= {"x", "y", "z"} and set(vocabularies[1]) <= {"up", "down"}
    width = ds.model_input_shape(meta)
    assert width == (sum(len(v) + 1 for v in vocabularies),)
    x, _ = tf_features.parse_fn(meta)(tf.constant(stored_records(root, meta, "train")))
    model_input = tf_features.preprocess_fn(meta)(x).numpy()
    assert model_input.shape == (meta.splits["train"].num_examples, *width)
    present = [sum(value not in MISSING_VALUES for value in strings)
               for _, strings, _ in read_back(root, meta, "train")]
    assert model_input.sum(axis=1).tolist() == present and min(present) == 1
    assert [i.name for i in serving_inputs.serving_inputs(meta)] == ["kind", "way"]


# ----------------------------------------------------------------------------- serving input names


def _meta_with_columns(numeric, categorical=()) -> ds.DatasetMetadata:
    return ds.DatasetMetadata(
        source_uri="x", source_format="csv",
        feature=ds.FeatureSpec(key=ds.FEATURES_KEY, dtype="float32", shape=(len(numeric),),
                               columns=tuple(numeric),
                               categorical_columns=tuple(categorical) or None),
        num_classes=2, preprocessing=ds.Preprocessing(kind="standardize"), compression=None,
        seed=0, eval_fraction=0.2, splits={})


def test_serving_input_names_follow_the_columns():
    meta = _meta_with_columns(["sepal length (cm)", "petal.width", "a-b", "x/y"], ["kind é"])
    assert [i.name for i in serving_inputs.serving_inputs(meta)] == [
        "sepal_length__cm_", "petal.width", "a-b", "x_y", "kind__"]
    assert serving_inputs.input_name("sepal length (cm)") == "sepal_length__cm_"


@pytest.mark.parametrize("first, second, name", [
    ("a b", "a_b", "a_b"), ("sepal length (cm)", "sepal length [cm]", "sepal_length__cm_")])
def test_two_columns_with_the_same_input_name_are_refused_naming_both(first, second, name):
    with pytest.raises(InvalidInputError) as err:
        serving_inputs.serving_inputs(_meta_with_columns([first], [second]))
    for text in (repr(first), repr(second), repr(name)):
        assert text in str(err.value)


def test_a_csv_whose_columns_collide_as_inputs_is_refused_before_anything_is_written(tmp_path):
    source = write_csv(tmp_path / "t.csv", ["a b", "label", "a_b"], [["1", "0", "x"], ["2", "1", "y"]])
    out = str(tmp_path / "out")
    with pytest.raises(InvalidInputError) as err:
        runtime.shard(source, out, num_shards=1, num_eval_shards=1, log=quiet)
    assert "'a b'" in str(err.value) and "'a_b'" in str(err.value)
    assert_nothing_written(out)


# ----------------------------------------------------------------------------- bad input

GOOD = [["1.0", "red", "0"], ["2.0", "blue", "1"], ["3.5", "red", "1"], ["-1", "green", "0"]]


def _table(header=("x", "colour", "label"), rows=None, replace=None):
    """Rows of GOOD (or `rows`), with `replace`: {(row index, column index): value}."""
    rows = [list(r) for r in (rows if rows is not None else GOOD * 3)]
    for (r, c), value in (replace or {}).items():
        rows[r][c] = value
    return list(header), rows


BAD_TABLES = {
    # name: ((header, rows), shard() kwargs, substrings the message must contain)
    "missing label column": (_table(), {"label_column": "species"},
                             ["'species'", "['x', 'colour', 'label']"]),
    "numbers and strings in a column": (
        _table(replace={(0, 1): "7", (5, 1): "8"}), {},
        ["column 'colour'", "'7' at line 2", "'blue' at line 3"]),
    "strings after numbers": (
        _table(replace={(6, 0): "many"}), {},
        ["column 'x'", "'1.0' at line 2", "'many' at line 8"]),
    "missing label in a row": (_table(replace={(4, 2): ""}), {},
                               ["line 6", "'label'"]),
    "inf in a numeric column": (_table(replace={(3, 0): "inf"}), {},
                                ["line 5", "'x'", "'inf'"]),
    "beyond float32 in a numeric column": (_table(replace={(2, 0): "1e39"}), {},
                                           ["line 4", "'x'", "'1e39'"]),
    "only missing values in a column": (
        _table(header=("x", "colour", "empty", "label"),
               rows=[[x, c, ["", "NA", "?"][i % 3], y] for i, (x, c, y) in enumerate(GOOD * 3)]),
        {}, ["column 'empty'", "no values"]),
}


@pytest.mark.parametrize("case", list(BAD_TABLES))
def test_bad_tables_are_named_and_nothing_is_written(case, tmp_path):
    (header, rows), kwargs, expected = BAD_TABLES[case]
    source = write_csv(tmp_path / "bad.csv", header, rows)
    out = str(tmp_path / "out")
    with pytest.raises(InvalidInputError) as err:
        runtime.shard(source, out, num_shards=1, num_eval_shards=1, split="hash", log=quiet,
                      **kwargs)
    for text in expected:
        assert text in str(err.value), str(err.value)
    assert_nothing_written(out)


def test_a_mixed_column_is_refused_when_the_string_comes_in_a_later_block_or_file(tmp_path):
    """Numbers fill the first 1,024-row block (and file); the string is found after it."""
    source = tmp_path / "src"
    rows = [[str(i), "a", str(i % 2)] for i in range(1500)]
    write_csv(source / "part-0.csv", ["x", "colour", "label"], rows)
    write_csv(source / "part-1.csv", ["x", "colour", "label"], [["5", "b", "0"], ["n/a?", "c", "1"]])
    out = str(tmp_path / "out")
    with pytest.raises(InvalidInputError) as err:
        runtime.shard(str(source), out, num_shards=1, num_eval_shards=1, split="hash", log=quiet)
    assert "column 'x'" in str(err.value) and "'0' at line 2" in str(err.value)
    assert "'n/a?' at line 3" in str(err.value)
    assert_nothing_written(out)


@pytest.mark.parametrize("text", [
    "x,colour,label\n1,red,0\n\n2,blue,1\n\nlots,green,0\n3,red,\n",  # blank lines 3 and 5
    'x,colour,label\n1,red,0\n2,"dark\nblue",1\n4,"a\nb",0\n3,red,\n',  # quoted newlines
], ids=["blank lines", "quoted newlines"])
def test_reported_line_numbers_are_the_file_lines(text, tmp_path):
    """The csv module skips blank lines and reads quoted newlines; the message still gives the
    line of the file where the bad row is."""
    source = tmp_path / "gaps.csv"
    source.write_text(text)
    assert text.splitlines()[6] == "3,red,"  # the row without a label is on line 7
    out = str(tmp_path / "out")
    with pytest.raises(InvalidInputError) as err:
        runtime.shard(str(source), out, num_shards=1, num_eval_shards=1, split="hash", log=quiet)
    assert "label column 'label' has no value at line 7 of 'gaps.csv'" in str(err.value)
    assert "line 7 " in str(err.value), str(err.value)
    assert_nothing_written(out)
