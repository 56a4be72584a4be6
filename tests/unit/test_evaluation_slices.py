"""Slices of the eval split (`evaluate_model`'s `slice_columns`): their arithmetic, the columns
they are read from, the refusals, and how the report and the run's summary show them.

The slices of a real sharded table (plain and gzip shards) are checked against the eval
split read back with the reader side of the contract (`tf_features.parse_fn`).
"""

from __future__ import annotations

import csv
import os

import numpy as np
import pytest

from kfdist.components.common import dataset_spec as ds  # first: kfdist selects legacy Keras
from kfdist.components.common import eval_predictions as ep
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.evaluate_model import slices as sl

TABLE = ds.FeatureSpec(key=ds.FEATURES_KEY, dtype="float32", shape=(2,), columns=("x", "year"),
                       categorical_columns=("colour",))


def _scored(labels, predicted, label_probability=None) -> ep.EvalPredictions:
    labels = np.asarray(labels, dtype=np.int64)
    probability = (np.full(len(labels), 0.5, np.float32) if label_probability is None
                   else np.asarray(label_probability, np.float32))
    return ep.EvalPredictions(labels=labels, predicted=np.asarray(predicted, dtype=np.int64),
                              label_probability=probability)


# ------------------------------------------------------------------------------ arithmetic


def test_a_string_column_gets_a_slice_per_value_the_largest_first():
    colour = np.array(["red", "blue", "red", "", "blue", "red", "green"], dtype=object)
    labels = [0, 1, 0, 1, 1, 0, 1]
    predicted = [0, 0, 1, 1, 1, 0, 0]
    probability = [0.9, 0.2, 0.4, 0.8, 0.7, 0.6, 0.1]
    got = sl.compute({"colour": colour}, _scored(labels, predicted, probability))
    assert [(s.value, s.examples) for s in got] == [
        ("red", 3), ("blue", 2), ("(empty)", 1), ("green", 1)]  # ties by value ("" < "green")
    by_value = {s.value: s for s in got}
    assert by_value["red"].accuracy == pytest.approx(2 / 3)
    assert by_value["blue"].accuracy == 0.5 and by_value["green"].accuracy == 0.0
    assert by_value["red"].loss == pytest.approx(-np.mean(np.log([0.9, 0.4, 0.6])))
    assert sum(s.examples for s in got) == len(labels)
    assert by_value["red"].key == "colour=red"


def test_a_numeric_column_with_few_values_gets_a_slice_per_value_and_one_for_missing():
    year = np.array([2008, 2007, np.nan, 2009, 2007, 2008, np.nan], dtype=np.float32)
    got = sl.compute({"year": year}, _scored([0] * 7, [0, 0, 1, 0, 1, 0, 0]))
    assert [(s.value, s.examples, s.accuracy) for s in got] == [
        ("2007", 2, 0.5), ("2008", 2, 1.0), ("2009", 1, 1.0), ("(missing)", 2, 0.5)]


def test_a_numeric_column_with_many_values_gets_quantile_bins():
    rng = np.random.default_rng(0)
    x = rng.normal(size=1000).astype(np.float32)
    x[:7] = np.nan
    labels = rng.integers(0, 2, size=1000)
    got = sl.compute({"x": x}, _scored(labels, labels))
    bins = [s for s in got if s.value != sl.MISSING]
    assert len(bins) == sl.NUMERIC_BINS
    assert all(s.value.startswith("[") and s.value.endswith(")") for s in bins[:-1])
    assert bins[-1].value.endswith("]")
    assert got[-1].value == sl.MISSING and got[-1].examples == 7
    assert sum(s.examples for s in got) == 1000
    assert all(abs(s.examples - 993 / sl.NUMERIC_BINS) <= 2 for s in bins)  # quantiles
    low = float(bins[1].value[1:].split(",")[0])
    assert np.sum(x[~np.isnan(x)] < low) == bins[0].examples


def test_an_inner_edge_belongs_to_the_upper_bin_and_the_maximum_to_the_last():
    values = np.arange(100, dtype=np.float32)  # edges 0, 19.8, 39.6, ... 99
    got = sl.compute({"n": values}, _scored([0] * 100, [0] * 100))
    assert [s.examples for s in got] == [20, 20, 20, 20, 20]
    assert got[-1].value == "[79.2, 99]"


def test_a_column_of_another_length_than_the_predictions_is_refused():
    with pytest.raises(InvalidInputError, match="column 'colour' has 2 eval values but there are 3"):
        sl.compute({"colour": np.array(["a", "b"], dtype=object)}, _scored([0] * 3, [0] * 3))


def test_metric_values_hold_each_columns_first_slices_and_read_back():
    many = [sl.SliceMetrics("c", f"v{i}", 30 - i, 0.5, 0.1) for i in range(sl.METRIC_SLICES + 3)]
    few = [sl.SliceMetrics("island", "Dream", 19, 0.9473, 0.2)]
    values = sl.metric_values(many + few)
    assert values["accuracy[island=Dream]"] == 0.9473 and values["eval_examples[island=Dream]"] == 19
    assert f"accuracy[c=v{sl.METRIC_SLICES - 1}]" in values
    assert f"accuracy[c=v{sl.METRIC_SLICES}]" not in values
    back = sl.from_metric_values({**values, "accuracy": 0.9, "eval_examples": 100.0})
    assert back["island=Dream"] == {"accuracy": 0.9473, "examples": 19}
    assert len(back) == sl.METRIC_SLICES + 1
    assert [s.key for s in sl.lowest(few + many[:2], 2, min_examples=1)] == ["c=v0", "c=v1"]


def test_the_lowest_slices_are_of_at_least_the_minimum_size():
    noise = sl.SliceMetrics("island", "Torgersen", 1, 0.0, 5.0)  # one row, wrong
    small = sl.SliceMetrics("island", "Dream", sl.MIN_SLICE_EXAMPLES - 1, 0.5, 1.0)
    big = [sl.SliceMetrics("island", "Biscoe", sl.MIN_SLICE_EXAMPLES, 0.8, 0.4),
           sl.SliceMetrics("year", "2008", 3 * sl.MIN_SLICE_EXAMPLES, 0.9, 0.3)]
    assert [s.key for s in sl.lowest([noise, small, *big], 2)] == ["island=Biscoe", "year=2008"]
    assert sl.lowest([noise, small], 3) == []


# ------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize("columns, message", [
    (["colour", "colour"], "slice_columns names ['colour'] more than once"),
    (["colour", ""], "slice_columns=['colour', ''] is invalid"),
    ("colour", "slice_columns='colour' is invalid; expected a list of column names"),
    (["nope"], "slice_columns names 'nope', which is not a column of the dataset; its columns "
               "are ['x', 'year', 'colour']"),
    (["label"], "slice_columns names 'label', the label"),
    (["id"], "slice_columns names 'id', which is not in the dataset: column 'id': 300 distinct "
             "values in 300 train rows (100%): an identifier"),
    (["gone"], "slice_columns names 'gone', which is not in the dataset: column 'gone': "
               "excluded as requested"),
])
def test_bad_slice_columns_are_refused_naming_them(columns, message):
    excluded = (ds.ExcludedColumn("id", ds.IDENTIFIER, 300, 300),
                ds.ExcludedColumn("gone", ds.REQUESTED))
    with pytest.raises(InvalidInputError) as err:
        sl.check_slice_columns(columns, TABLE, excluded, label_column="label")
    assert message in str(err.value)


def test_images_have_no_columns_to_slice_by():
    images = ds.FeatureSpec(key=ds.IMAGE_KEY, dtype="uint8", shape=(28, 28))
    sl.check_slice_columns([], images)
    with pytest.raises(InvalidInputError, match="the examples are images"):
        sl.check_slice_columns(["label"], images)


# ------------------------------------------------------------------------------ a real dataset


def _write_table(path, rows: int = 400) -> str:
    rng = np.random.default_rng(1)
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["colour", "x", "year", "label"])
        for i in range(rows):
            out.writerow([["red", "green", "blue", ""][i % 4], f"{rng.normal():.4f}",
                          "NA" if i % 50 == 0 else 2000 + i % 3, i % 2])
    return str(path)


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_the_slices_of_a_sharded_table_count_its_eval_split(tmp_path, compression):
    import tensorflow as tf

    from kfdist.components.common import tf_features
    from kfdist.components.shard_dataset import runtime

    root = str(tmp_path / "dataset")
    meta = runtime.shard(_write_table(tmp_path / "t.csv"), root, num_shards=2, num_eval_shards=2,
                         split="hash", compression=compression, log=lambda _: None)
    records = tf.data.TFRecordDataset(meta.shard_paths(root, "eval"),
                                      compression_type=tf_features.compression_type(meta))
    raw, labels = next(iter(records.batch(10_000).map(tf_features.parse_fn(meta))))
    labels = labels.numpy()
    colours = [v.decode() for v in raw[ds.CATEGORICAL_KEY].numpy()[:, 0]]
    years = raw[ds.FEATURES_KEY].numpy()[:, meta.feature.columns.index("year")]
    predicted = np.where(np.arange(len(labels)) % 3 == 0, 1 - labels, labels)
    scored = _scored(labels, predicted)

    got = sl.slice_eval_split(meta, root, ["colour", "year", "x"], scored)
    by_key = {s.key: s for s in got}
    for colour in set(colours):
        mine = np.array(colours) == colour
        s = by_key[f"colour={colour or sl.EMPTY}"]
        assert s.examples == mine.sum()
        assert s.accuracy == pytest.approx(np.mean(predicted[mine] == labels[mine]))
    assert by_key["year=2001"].examples == np.sum(years == 2001)
    assert by_key["year=(missing)"].examples == np.sum(np.isnan(years))
    for column in ("colour", "year", "x"):
        assert sum(s.examples for s in got if s.column == column) == len(labels)

    with pytest.raises(InvalidInputError, match="the dataset changed since it was scored"):
        sl.slice_eval_split(meta, root, ["colour"], _scored(labels[::-1], predicted))
    assert sl.slice_eval_split(meta, root, [], scored) == []


def test_a_record_that_is_not_an_example_of_the_dataset_is_named(tmp_path):
    from kfdist.components.common.tfrecord_framing import TFRecordFileWriter, read_records
    from kfdist.components.shard_dataset import runtime

    root = str(tmp_path / "dataset")
    meta = runtime.shard(_write_table(tmp_path / "t.csv"), root, num_shards=2, num_eval_shards=1,
                         split="hash", log=lambda _: None)
    [shard] = meta.shard_paths(root, "eval")
    good = list(read_records(shard))
    writer = TFRecordFileWriter(shard)
    writer.write_many(good[:3] + [b"\x0a\x00"])  # record 3: an empty Example
    writer.close()
    with pytest.raises(InvalidInputError) as err:
        sl.read_columns(meta, root, ["colour", "year"])
    assert (f"record 3 of {shard!r} is not an example of this dataset: its metadata says each "
            "example has one int64 'label', 1 bytes 'categorical', 2 float 'features' values"
            ) in str(err.value)


# ------------------------------------------------------------------------------ report, summary


def _result(slices):
    from kfdist.components.evaluate_model.runtime import EvaluationResult

    return EvaluationResult(accuracy=0.9, loss=0.3, num_examples=100,
                            confusion_matrix=[[50, 5], [5, 40]], class_names=["a", "b"],
                            blessed=True, reason="accuracy 0.900 ≥ threshold 0.850",
                            threshold=0.85, slices=slices)


def test_the_report_shows_each_columns_slices_and_the_lowest_ones():
    from kfdist.components.evaluate_model import report

    every = [sl.SliceMetrics("shop", f"s{i}", 100 - i, 0.5 + i / 100, 0.1)
             for i in range(report.REPORTED_SLICES + 4)]
    island = [sl.SliceMetrics("island", "Dream", 19, 0.8, 0.4),
              sl.SliceMetrics("island", "Biscoe", 31, 1.0, 0.01)]
    page = report.render_report_html(_result(island + every), {}, None)
    assert "<h3>island</h3>" in page and "<h3>shop</h3>" in page
    assert 'alt="accuracy by island" src="data:image/png;base64,' in page
    assert "<td>Dream</td><td>19</td><td>80.0%</td><td>0.4000</td><td>-10.0 pp</td>" in page
    assert f"<td>s{report.REPORTED_SLICES - 1}</td>" in page
    assert f"<td>s{report.REPORTED_SLICES}</td>" not in page
    rest = every[report.REPORTED_SLICES:]
    assert f"4 smaller slices ({sum(s.examples for s in rest):,} examples) not shown" in page
    summary = report.render_report_markdown(_result(island + every))
    assert ("Lowest-accuracy slices: `shop=s0` 50.0% (100 examples), `shop=s1` 51.0% "
            "(99 examples), `shop=s2` 52.0% (98 examples) (of the slices of at least "
            f"{sl.MIN_SLICE_EXAMPLES} examples)") in summary
    tiny = report.render_report_markdown(_result([sl.SliceMetrics("shop", "x", 1, 0.0, 9.0)]))
    assert "Lowest-accuracy" not in tiny
    assert "Slices" not in report.render_report_html(_result([]), {}, None)
    assert "slices" not in report.render_report_markdown(_result([]))


def test_the_run_summary_names_the_lowest_accuracy_slice(tmp_path):
    from kfdist.run_summary import format_summary

    minimum = sl.MIN_SLICE_EXAMPLES
    summary = {"eval": {"accuracy": 0.98, "threshold": 0.9, "slices": {
                   "island=Torgersen": {"accuracy": 0.0, "examples": 1},
                   "island=Dream": {"accuracy": 0.9474, "examples": minimum + 8},
                   "island=Biscoe": {"accuracy": 1.0, "examples": minimum + 1}}},
               "blessed": True, "export": {"exported": True, "path": "/x"},
               "wall_seconds": 1.0, "output_dir": str(tmp_path), "logs_dir": "logs"}
    shown = format_summary(summary)
    assert (f"lowest-accuracy slice: island=Dream 0.9474 ({minimum + 8} examples; of the slices "
            f"of at least {minimum}") in shown
    assert "Torgersen" not in shown  # one row at 0.0000 is noise
    summary["eval"]["slices"] = {"island=Torgersen": {"accuracy": 0.0, "examples": 1}}
    assert (f"slices: none has {minimum} or more examples, too few to single one out"
            in format_summary(summary))
    summary["eval"]["slices"] = {}
    assert "slice" not in format_summary(summary)


def test_a_run_checks_slice_columns_against_the_identifiers_it_would_leave_out(tmp_path):
    from kfdist.local_run import RunOptions
    from kfdist.run_checks import validate_run_options

    path = tmp_path / "t.csv"
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["id", "colour", "label"])
        out.writerows([f"user-{i}", ["red", "blue"][i % 2], i % 2] for i in range(300))
    opts = dict(output_dir=str(tmp_path / "run"), pipeline="tabular", source_uri=str(path))
    validate_run_options(RunOptions(**opts, slice_columns=("colour",)))
    with pytest.raises(InvalidInputError, match="slice_columns names 'id', which is not in the "
                                                "dataset: column 'id': 2.. distinct values"):
        validate_run_options(RunOptions(**opts, slice_columns=("id",)))
    validate_run_options(RunOptions(**opts, slice_columns=("id",), keep_columns=("id",)))
    assert sorted(os.listdir(tmp_path)) == ["t.csv"]
