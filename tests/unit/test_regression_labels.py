"""A table whose label is a number: the task chosen, the label recorded, the rows encoded.

On scikit-learn's diabetes table (442 rows, `target` holds 214 distinct whole numbers from
25 to 346) and wine (its `proline` holds 121), written to CSV here.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import sklearn.datasets

from kfdist.components.common.class_counts import label_lines, label_record
from kfdist.components.common.dataset_spec import (
    CLASSIFICATION, REGRESSION, LabelStatistics, load_metadata)
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.common.label_numbers import LabelTally, number_lines
from kfdist.components.shard_dataset import csv_reader, runtime
from kfdist.components.shard_dataset.example_encoding import CanonicalExampleEncoder
from kfdist.components.shard_dataset.label_values import MAX_NUMBER_CLASSES
from kfdist.components.shard_dataset.source import ReaderOptions


@pytest.fixture()
def diabetes(tmp_path) -> str:
    path = tmp_path / "diabetes.csv"
    sklearn.datasets.load_diabetes(as_frame=True).frame.to_csv(path, index=False)
    return str(path)


def shard(source, out, **kwargs):
    lines = []
    meta = runtime.shard(source, str(out), label_column=kwargs.pop("label_column", "target"),
                         num_shards=2, log=lines.append, **kwargs)
    return meta, lines


def test_more_distinct_numbers_than_classes_may_have_is_a_regression(diabetes, tmp_path):
    meta, lines = shard(diabetes, tmp_path / "out")
    assert meta.task == REGRESSION and meta.num_classes == 0 and meta.class_counts is None
    assert load_metadata(str(tmp_path / "out")) == meta  # the task and figures round-trip
    target = sklearn.datasets.load_diabetes(as_frame=True).frame["target"]
    assert target.nunique() > MAX_NUMBER_CLASSES
    train, held_out = meta.label_statistics["train"], meta.label_statistics["eval"]
    assert train.examples + held_out.examples == len(target) == 442
    assert min(train.min, held_out.min) == target.min() == 25
    assert max(train.max, held_out.max) == target.max() == 346
    both = (train.mean * train.examples + held_out.mean * held_out.examples) / 442
    assert both == pytest.approx(target.mean())
    assert "label 'target': a number (regression): 442 examples from 25 to 346, mean 152.1 " \
           f"(train deviation {train.std:.4g})" in lines


def test_the_held_out_rows_keep_their_numbers_as_float32(diabetes, tmp_path):
    meta, _ = shard(diabetes, tmp_path / "out")
    from kfdist.components.evaluate_model.eval_columns import read_columns

    _, labels = read_columns(meta, str(tmp_path / "out"), [])
    assert labels.dtype == np.float32 and len(labels) == meta.splits["eval"].num_examples
    target = sklearn.datasets.load_diabetes(as_frame=True).frame["target"].to_numpy()
    assert set(labels.tolist()) <= set(target.tolist())
    assert float(labels.mean()) == pytest.approx(meta.label_statistics["eval"].mean, rel=1e-6)


def test_task_regression_makes_a_few_numbers_a_number_too(tmp_path):
    frame = sklearn.datasets.load_wine(as_frame=True).frame  # hue: 78 values, not whole
    frame.to_csv(tmp_path / "w.csv", index=False)
    meta, _ = shard(str(tmp_path / "w.csv"), tmp_path / "out", label_column="hue",
                    task=REGRESSION)
    assert meta.task == REGRESSION
    assert meta.label_statistics["train"].min >= frame.hue.min()


def test_task_classification_keeps_the_classes_and_the_refusal(diabetes, tmp_path):
    with pytest.raises(InvalidInputError) as err:
        shard(diabetes, tmp_path / "out", task=CLASSIFICATION)
    message = str(err.value)
    assert "\n" not in message and message.startswith(
        "label column 'target' holds 214 distinct numbers (classes are at most 100): a "
        "quantity to predict, not classes; predict the number with task=regression")
    assert not (tmp_path / "out").exists()
    frame = sklearn.datasets.load_wine(as_frame=True).frame
    frame.to_csv(tmp_path / "w.csv", index=False)
    meta, _ = shard(str(tmp_path / "w.csv"), tmp_path / "wine", task=CLASSIFICATION)
    assert meta.task == CLASSIFICATION and meta.num_classes == 3


def test_task_regression_refuses_a_text_label_naming_a_value_and_its_line(tmp_path):
    frame = sklearn.datasets.load_wine(as_frame=True).frame
    frame["target"] = frame["target"].map({0: "barolo", 1: "grignolino", 2: "barbera"})
    frame.to_csv(tmp_path / "w.csv", index=False)
    with pytest.raises(InvalidInputError) as err:
        shard(str(tmp_path / "w.csv"), tmp_path / "out", task=REGRESSION)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("label column 'target' holds text ('barolo' at line 2 of 'w.csv'")
    assert "task=regression predicts a number" in message
    assert not (tmp_path / "out").exists()


def test_an_unknown_task_and_regression_of_images_are_refused(tmp_path, diabetes):
    with pytest.raises(InvalidInputError, match=r"^task='numbers' is not a task; expected one "
                                                r"of \['auto', 'classification', 'regression'\]"):
        shard(diabetes, tmp_path / "out", task="numbers")
    from kfdist.sample_data import SAMPLES

    SAMPLES["mnist"](str(tmp_path / "mnist"))
    with pytest.raises(InvalidInputError, match="this source is mnist_idx, whose labels are "
                                                "classes"):
        shard(str(tmp_path / "mnist"), tmp_path / "out", task=REGRESSION)


def test_beam_and_local_build_the_same_regression_dataset(diabetes, tmp_path):
    import collections

    import tensorflow as tf

    local, _ = shard(diabetes, tmp_path / "local")
    beam, _ = shard(diabetes, tmp_path / "beam", runner="beam",
                    beam_options=("direct_num_workers=2",))
    assert beam.task == local.task == REGRESSION and beam.class_counts is None
    for split in ("train", "eval"):
        ours, theirs = beam.label_statistics[split], local.label_statistics[split]
        assert (ours.examples, ours.min, ours.max) == (theirs.examples, theirs.min, theirs.max)
        assert (ours.mean, ours.std) == pytest.approx((theirs.mean, theirs.std), rel=1e-12)
        read = [collections.Counter(r.numpy() for r in tf.data.TFRecordDataset(
            meta.shard_paths(str(tmp_path / name), split))) for meta, name in
            ((beam, "beam"), (local, "local"))]
        assert read[0] == read[1]


def test_the_two_csv_readers_give_the_same_float_labels(diabetes):
    options = ReaderOptions(label_column="target")
    fast, slow = (np.concatenate([b.labels for b in csv_reader.open_csv_source(
        [diabetes], options, columnar=columnar).batches()]) for columnar in (True, False))
    assert fast.dtype == slow.dtype == np.float64 and np.array_equal(fast, slow)


def test_a_float_label_is_encoded_as_tensorflow_would_encode_it():
    import tensorflow as tf

    encoder = CanonicalExampleEncoder("features", 8)
    inputs = np.array([[1, 2], [3, 4]], np.float32)
    strings = np.array([["a"], ["b"]], dtype=object)
    records = encoder.encode(inputs, np.array([151.0, 2.5]), strings)
    for row, (record, label) in enumerate(zip(records, (151.0, 2.5))):
        expected = tf.train.Example(features=tf.train.Features(feature={
            "features": tf.train.Feature(float_list=tf.train.FloatList(value=inputs[row])),
            "categorical": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[strings[row, 0].encode()])),
            "label": tf.train.Feature(float_list=tf.train.FloatList(value=[label]))}))
        assert record == expected.SerializeToString(deterministic=True)


def test_the_label_tally_folds_blocks_as_numpy_computes_the_whole():
    values = np.random.default_rng(3).normal(50.0, 12.0, 1000)
    tally, other = LabelTally(), LabelTally()
    for block in np.array_split(values[:600], 7):
        tally.update(block)
    other.update(values[600:])
    tally.merge(other.count, other.mean, other.m2, other.low, other.high)
    stats = tally.statistics()
    assert stats.examples == 1000 and stats.mean == pytest.approx(values.mean())
    assert stats.std == pytest.approx(values.std()) and stats.min == values.min()
    assert stats.max == values.max()
    assert LabelTally().statistics() is None


def test_the_label_record_and_line_and_a_constant_label_warned_of(diabetes, tmp_path):
    meta, _ = shard(diabetes, tmp_path / "out")
    record = label_record(meta)
    assert record["task"] == REGRESSION and record["warnings"] == []
    assert record["train"]["examples"] == meta.label_statistics["train"].examples
    assert label_lines(record)[0].startswith("label 'target': a number (regression)")
    flat = LabelStatistics(mean=7.0, std=0.0, min=7.0, max=7.0, examples=10)
    constant = label_record(dataclasses.replace(meta, label_statistics={"train": flat}))
    assert number_lines(constant) == [
        "label 'target': a number (regression): 10 examples from 7 to 7, mean 7 (train "
        "deviation 0)", "warning: every train label is 7: there is nothing to learn"]


def test_a_label_turned_from_number_to_classes_or_back_is_an_anomaly(diabetes, tmp_path):
    from kfdist.components.shard_dataset.validation import DataAnomalyError

    def refused(source: str, reference: str) -> str:
        lines = []
        with pytest.raises(DataAnomalyError):
            runtime.shard(source, str(tmp_path / "out"), label_column="target",
                          reference_dataset=str(tmp_path / reference), log=lines.append)
        assert not (tmp_path / "out").exists()
        return "\n".join(line for line in lines if line.startswith("anomaly:"))

    shard(diabetes, tmp_path / "numbers")
    frame = sklearn.datasets.load_diabetes(as_frame=True).frame
    frame["target"] = pd.cut(frame.target, 3, labels=["low", "mid", "high"])
    frame.to_csv(tmp_path / "classes.csv", index=False)
    assert refused(str(tmp_path / "classes.csv"), "numbers") == (
        "anomaly: label 'target': the reference's is a number (regression), this data's is "
        "classes (classification); a model of one does not replace a model of the other (task "
        "chooses what the label is)")
    shard(str(tmp_path / "classes.csv"), tmp_path / "classes")
    assert "the reference's is classes (classification), this data's is a number " \
           "(regression)" in refused(diabetes, "classes")
    again, lines = shard(diabetes, tmp_path / "again", reference_dataset=str(tmp_path / "numbers"))
    assert again.task == REGRESSION and not [line for line in lines if "anomaly:" in line]


def test_a_run_warns_of_the_threshold_its_label_does_not_use(diabetes, tmp_path):
    from kfdist.local_run import RunOptions
    from kfdist.run_checks import validate_run_options

    frame = sklearn.datasets.load_wine(as_frame=True).frame
    frame.to_csv(tmp_path / "w.csv", index=False)
    run = dict(output_dir=str(tmp_path / "run"), pipeline="tabular", label_column="target")
    assert validate_run_options(RunOptions(**run, source_uri=diabetes)) == []
    assert validate_run_options(RunOptions(**run, source_uri=diabetes,
                                           accuracy_threshold=0.5)) == [
        "--accuracy-threshold 0.5 does not apply: the label is a number (regression), judged "
        "by its RMSE (--rmse-threshold)"]
    assert validate_run_options(RunOptions(**run, source_uri=str(tmp_path / "w.csv"),
                                           rmse_threshold=60.0)) == [
        "--rmse-threshold 60 does not apply: the label holds classes, judged by their accuracy "
        "(--accuracy-threshold)"]
    assert validate_run_options(RunOptions(**run, source_uri=diabetes, rmse_threshold=60.0,
                                           task=REGRESSION)) == []
    assert not (tmp_path / "run").exists()
