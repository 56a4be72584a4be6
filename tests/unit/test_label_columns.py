"""A table's label column on real public tables: classes, refusals, counts and the check.

scikit-learn's wine (3 cultivars, 178 rows) and breast cancer (569 rows, 0/1)
are written to CSV here. The label is data too: its values become classes
(numbers that are not 0..k-1 by a vocabulary named by the numbers), a label
that mixes numbers and text or holds a quantity is refused in one line, each
class is counted per split, and a class gained or lost against the reference
is an anomaly of the data check.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
import sklearn.datasets

from kfdist.components.common.class_counts import label_lines, label_record
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.shard_dataset import csv_reader, runtime
from kfdist.components.shard_dataset.label_values import label_classes
from kfdist.components.shard_dataset.scan import SourceChangedError
from kfdist.components.shard_dataset.validation import DataAnomalyError
from kfdist.flag_wording import command_wording

CULTIVARS = {0: "barolo", 1: "grignolino", 2: "barbera"}


def wine(path, labels=None, keep=None) -> str:
    """scikit-learn's wine as CSV, its `target` relabelled by `labels` (and rows `keep`)."""
    frame = sklearn.datasets.load_wine(as_frame=True).frame
    if labels is not None:
        frame["target"] = frame["target"].map(labels)
    if keep is not None:
        frame = frame[keep(frame)]
    frame.to_csv(path, index=False)
    return str(path)


def shard(source, out, lines=None, **kwargs):
    return runtime.shard(source, str(out), label_column="target", num_shards=2,
                         log=(lines.append if lines is not None else lambda line: None), **kwargs)


def test_whole_numbers_other_than_0_to_k_are_classes_named_by_them(tmp_path):
    meta = shard(wine(tmp_path / "w.csv", {0: 9, 1: 3, 2: 5}), tmp_path / "out")
    assert meta.num_classes == 3 and meta.class_names == ("3", "5", "9")
    counts = [a + b for a, b in zip(meta.class_counts["train"], meta.class_counts["eval"])]
    assert counts == [71, 48, 59]  # grignolino (3), barbera (5), barolo (9)
    one_to_three = shard(wine(tmp_path / "w123.csv", {0: 1, 1: 2, 2: 3}), tmp_path / "out123")
    assert one_to_three.class_names == ("1", "2", "3")
    signed = shard(wine(tmp_path / "signed.csv", {0: 10, 1: 9, 2: -1}), tmp_path / "signed")
    assert signed.class_names == ("-1", "9", "10")  # in numeric order, not as text
    ids = shard(wine(tmp_path / "w012.csv"), tmp_path / "out012")
    assert ids.num_classes == 3 and ids.class_names is None  # 0..k-1: their own ids


def test_a_label_mixing_numbers_and_text_is_refused_in_one_line(tmp_path):
    frame = sklearn.datasets.load_breast_cancer(as_frame=True).frame
    frame["target"] = frame["target"].astype(object)
    frame.loc[6, "target"] = "benign"  # one row among 0/1, on line 8 of the file
    frame.to_csv(tmp_path / "bc.csv", index=False)
    out = tmp_path / "out"
    with pytest.raises(InvalidInputError) as err:
        shard(str(tmp_path / "bc.csv"), out)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("label column 'target' mixes numbers and text: '0' at line 2 of "
                              "'bc.csv' is a number but 'benign' at line 8 of 'bc.csv' is not")
    assert message.endswith("fix those rows, or name another column with label_column")
    assert not out.exists()


def test_kfdist_run_refuses_it_in_one_line_naming_its_flag(tmp_path):
    frame = sklearn.datasets.load_breast_cancer(as_frame=True).frame
    frame["target"] = frame["target"].astype(object)
    frame.loc[6, "target"] = "benign"
    frame.to_csv(tmp_path / "bc.csv", index=False)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "kfdist", "run", "tabular", "--data",
                           str(tmp_path / "bc.csv"), "--label-column", "target", "--output",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    [line] = [l for l in proc.stderr.splitlines() if l.startswith("kfdist:")]
    assert line.startswith("kfdist: invalid input: label column 'target' mixes numbers and text")
    assert line.endswith("fix those rows, or name another column with --label-column")
    assert not out.exists()


def _with_missing_labels(path, value: str, names=None, row: int = 6) -> str:
    """Breast cancer (0/1, or `names`) as CSV with row `row`'s label `value` (file line 8)."""
    frame = sklearn.datasets.load_breast_cancer(as_frame=True).frame
    frame["target"] = (frame["target"].map(names) if names else frame["target"]).astype(object)
    frame.loc[row, "target"] = value
    frame.to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize("names", [None, {0: "malignant", 1: "benign"}], ids=["numbers", "text"])
@pytest.mark.parametrize("value", ["NA", "", "null"])
def test_a_missing_label_is_refused_alike_empty_or_na_text_or_number(value, names, tmp_path):
    """`NA` is a missing label as an empty cell is (as the statistics count it), in a text label
    as in a numeric one: never a class of its own, never a mix of numbers and text."""
    source = _with_missing_labels(tmp_path / "bc.csv", value, names)
    spelled = f" ({value!r} marks a missing value, as an empty cell does)" if value else ""
    for task in ("auto", "regression") if names is None else ("auto",):
        with pytest.raises(InvalidInputError) as err:
            shard(source, tmp_path / "out", task=task)
        assert str(err.value) == (
            f"label column 'target' has no value at line 8 of 'bc.csv'{spelled}; every row "
            "needs its label: fill it in or drop the row, or name another column with "
            "label_column")
    assert not (tmp_path / "out").exists()


def test_kfdist_run_refuses_an_na_label_in_one_line_naming_its_flag(tmp_path):
    source = _with_missing_labels(tmp_path / "bc.csv", "NA", {0: "malignant", 1: "benign"},
                                  row=100)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "kfdist", "run", "tabular", "--data", source,
                           "--label-column", "target", "--output", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    [line] = [l for l in proc.stderr.splitlines() if l.startswith("kfdist:")]
    assert line == ("kfdist: invalid input: label column 'target' has no value at line 102 of "
                    "'bc.csv' ('NA' marks a missing value, as an empty cell does); every row "
                    "needs its label: fill it in or drop the row, or name another column with "
                    "--label-column")
    assert not out.exists()


def test_a_label_holding_a_quantity_is_refused_as_classes_naming_its_distinct_values(tmp_path):
    frame = sklearn.datasets.load_wine(as_frame=True).frame
    frame.to_csv(tmp_path / "w.csv", index=False)
    with pytest.raises(InvalidInputError, match=r"^label column 'proline' holds 121 distinct "
                                                r"numbers \(classes are at most 100\)"):
        runtime.shard(str(tmp_path / "w.csv"), str(tmp_path / "out"), label_column="proline",
                      task="classification", log=lambda line: None)
    with pytest.raises(InvalidInputError, match=r"^label column 'hue' holds numbers that are "
                                                r"not whole \(e.g. 0\.48\).*predict the "
                                                r"number with task=regression"):
        runtime.shard(str(tmp_path / "w.csv"), str(tmp_path / "out"), label_column="hue",
                      log=lambda line: None)  # auto: a few numbers not whole are no quantity
    assert not (tmp_path / "out").exists()


def test_the_classes_are_counted_per_split_and_logged(tmp_path):
    lines = []
    meta = shard(wine(tmp_path / "w.csv", CULTIVARS), tmp_path / "out", lines)
    record = label_record(meta)
    assert record["column"] == "target"
    assert [(c["name"], c["train"] + c["eval"]) for c in record["classes"]] == [
        ("barbera", 48), ("barolo", 59), ("grignolino", 71)]
    assert sum(c["eval"] for c in record["classes"]) == meta.splits["eval"].num_examples
    assert record["warnings"] == []
    assert "label 'target': 3 classes: 'barbera' 48 (27%), 'barolo' 59 (33%), " \
           "'grignolino' 71 (40%)" in lines


def test_a_rare_class_and_a_class_the_held_out_split_lacks_are_warned_of(tmp_path):
    """Three barbera rows, all in the source's train file: 3 of 133 rows, none held out."""
    frame = sklearn.datasets.load_wine(as_frame=True).frame
    frame["target"] = frame["target"].map(CULTIVARS)
    common = frame[frame.target != "barbera"]
    source = tmp_path / "source"
    source.mkdir()
    test = common.iloc[::5]
    train = frame.drop(test.index)
    train = train[(train.target != "barbera") | train.index.isin(
        train.index[train.target == "barbera"][:3])]
    train.to_csv(source / "train.csv", index=False)
    test.to_csv(source / "test.csv", index=False)
    lines = []
    meta = shard(str(source), tmp_path / "out", lines)
    assert meta.split == "predefined"
    warnings = label_record(meta)["warnings"]
    assert warnings == [
        "1 class(es) under 5.0% of the 133 examples: 'barbera' 3 (2.3%); accuracy barely shows "
        "how they are predicted: read their rows of the confusion matrix",
        "the held-out split has no example of class(es) 'barbera': the evaluation never scores "
        "them (add rows of it to the test files)"]
    assert [f"warning: {w}" for w in warnings] == label_lines(label_record(meta))[1:]
    assert all(f"warning: {w}" in lines for w in warnings)
    page = (tmp_path / "out" / "data_validation.html").read_text()
    assert "<h2>Label (target): 3 classes</h2>" in page
    assert "<td>barbera</td><td>3</td><td>0</td><td>2.3%</td>" in page


def test_a_class_renamed_or_missing_is_an_anomaly_against_the_reference(tmp_path):
    reference = shard(wine(tmp_path / "w.csv", CULTIVARS), tmp_path / "reference")
    assert reference.class_names == ("barbera", "barolo", "grignolino")
    renamed = wine(tmp_path / "renamed.csv", {**CULTIVARS, 2: "Barbera"})
    lines = []
    with pytest.raises(DataAnomalyError, match="^2 anomalies"):
        shard(renamed, tmp_path / "out", lines, reference_dataset=str(tmp_path / "reference"))
    anomalies = [line for line in lines if line.startswith("anomaly: ")]
    assert anomalies == [
        "anomaly: label 'target': 1 class(es) the reference never had, in 48 of 178 rows: "
        "'Barbera' (48 rows); the reference's classes are 'barbera', 'barolo', 'grignolino'",
        "anomaly: label 'target': 1 class(es) of the reference missing from this data: "
        "'barbera' (48 rows) in the reference; a model trained on it cannot predict them"]
    assert not (tmp_path / "out").exists()
    missing = wine(tmp_path / "missing.csv", CULTIVARS, keep=lambda f: f.target != "barbera")
    lines = []
    with pytest.raises(DataAnomalyError, match="^1 anomaly"):
        shard(missing, tmp_path / "out", lines, reference_dataset=str(tmp_path / "reference"))
    assert [line for line in lines if line.startswith("anomaly: ")] == [anomalies[1]]
    meta = shard(missing, tmp_path / "out", reference_dataset=str(tmp_path / "reference"),
                 allow_anomalies=True)
    assert meta.class_names == ("barolo", "grignolino")
    same = shard(wine(tmp_path / "same.csv", CULTIVARS), tmp_path / "same",
                 reference_dataset=str(tmp_path / "reference"))
    assert same.class_names == reference.class_names  # the same classes: no anomaly


def test_whole_numbers_past_2_to_the_53_stay_apart_and_keep_their_text(tmp_path):
    big = ["9007199254740993", "9007199254740992", "18014398509481985"]
    classes = label_classes(big, "id", paths=[], num_columns=1, label_index=0,
                            row_blocks=csv_reader._iter_row_blocks)
    assert classes.names == ("9007199254740992", "9007199254740993", "18014398509481985")
    assert [classes.ids[v] for v in big] == [1, 0, 2]
    assert label_classes(["2.0", "0", "1"], "c", paths=[], num_columns=1, label_index=0,
                         row_blocks=csv_reader._iter_row_blocks).names is None  # 2.0 is 2


def test_files_that_change_while_the_label_is_read_are_named_not_a_traceback(tmp_path):
    """The distinct values held text, but the file read again for its lines holds none."""
    (tmp_path / "t.csv").write_text("x,target\n1,0\n2,1\n")
    with pytest.raises(SourceChangedError, match="changed while they were read"):
        label_classes(["0", "1", "benign"], "target", paths=[str(tmp_path / "t.csv")],
                      num_columns=2, label_index=1, row_blocks=csv_reader._iter_row_blocks)


def _written_before_class_counts(root) -> None:
    """Rewrites a dataset's metadata as a release that counted no classes wrote it: number
    labels as ids 0..max, no names, no counts."""
    path = root / "metadata.json"
    meta = json.loads(path.read_text())
    meta["num_classes"] = int(max(meta["class_names"], key=int)) + 1
    meta.pop("class_names"), meta.pop("class_counts")
    path.write_text(json.dumps(meta))


def test_a_reference_written_before_classes_were_counted_is_no_false_anomaly(tmp_path):
    labels = {0: 2, 1: 4, 2: 6}  # an old dataset of 2, 4, 6 named ids 0..6
    shard(wine(tmp_path / "w.csv", labels), tmp_path / "reference")
    _written_before_class_counts(tmp_path / "reference")
    lines = []
    meta = shard(wine(tmp_path / "later.csv", labels), tmp_path / "out", lines,
                 reference_dataset=str(tmp_path / "reference"))
    assert meta.class_names == ("2", "4", "6")
    assert not [line for line in lines if line.startswith("anomaly: ")], lines
    # Names without counts: a new class is still one; a missing one is not looked for.
    shard(wine(tmp_path / "names.csv", CULTIVARS), tmp_path / "named")
    path = tmp_path / "named" / "metadata.json"
    path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items()
                                if k != "class_counts"}))
    renamed = wine(tmp_path / "renamed.csv", {**CULTIVARS, 2: "Barbera"})
    lines = []
    with pytest.raises(DataAnomalyError, match="^1 anomaly"):
        shard(renamed, tmp_path / "out2", lines, reference_dataset=str(tmp_path / "named"))
    assert [line for line in lines if line.startswith("anomaly: ")] == [
        "anomaly: label 'target': 1 class(es) the reference never had, in 48 of 178 rows: "
        "'Barbera' (48 rows); the reference's classes are 'barbera', 'barolo', 'grignolino'"]


def _with_counts(meta, train, held_out, names=None):
    return dataclasses.replace(meta, num_classes=len(train), class_names=names,
                               class_counts={"train": tuple(train), "eval": tuple(held_out)})


def test_forty_even_classes_are_not_rare_and_a_line_names_ten(tmp_path):
    meta = shard(wine(tmp_path / "w.csv"), tmp_path / "out")
    names = tuple(f"c{i:02d}" for i in range(40))
    record = label_record(_with_counts(meta, [8] * 40, [2] * 40, names))
    assert record["warnings"] == []  # 2.5% each: under 5%, not under half an even share
    first = ", ".join(f"'c{i:02d}' 10 (2%)" for i in range(10))
    assert label_lines(record) == [f"label 'target': 40 classes: {first} and 30 more"]
    uneven = label_record(_with_counts(meta, [8] * 39 + [1], [2] * 40, names))
    assert uneven["warnings"] == [
        "1 class(es) under 1.2% of the 393 examples: 'c39' 3 (0.8%); accuracy barely shows how "
        "they are predicted: read their rows of the confusion matrix"]


def test_a_class_id_without_an_example_is_warned_of_not_called_rare(tmp_path):
    """A TFRecord's labels 1, 2, 3 are 3 classes named by them (no empty id 0); a dataset with
    a class of no example is warned of once, not called rare or missing from a split."""
    import tensorflow as tf

    frame = sklearn.datasets.load_wine(as_frame=True).frame
    features = frame.drop(columns="target").to_numpy("float32")
    with tf.io.TFRecordWriter(str(tmp_path / "wine.tfrecord")) as writer:
        for x, y in zip(features, frame["target"] + 1):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(y)])),
            })).SerializeToString())
    lines = []
    meta = runtime.shard(str(tmp_path / "wine.tfrecord"), str(tmp_path / "out"), num_shards=2,
                         log=lines.append)
    assert meta.num_classes == 3 and meta.class_names == ("1", "2", "3")
    assert label_record(meta)["warnings"] == []
    assert "label 'label': 3 classes: '1' 59 (33%), '2' 71 (40%), '3' 48 (27%)" in lines
    named = _with_counts(meta, [0, 50, 40], [0, 10, 10], ("cat", "dog", "emu"))
    assert label_record(named)["warnings"] == [
        "the data has no example of class(es) 'cat': the model has an output for each but "
        "cannot learn them"]


def test_a_held_out_split_lacking_a_class_names_the_flag_kfdist_run_takes(tmp_path):
    meta = shard(wine(tmp_path / "w.csv"), tmp_path / "out")
    hashed = label_record(_with_counts(meta, [40, 50, 30], [10, 10, 0]))["warnings"]
    assert hashed == ["the held-out split has no example of class(es) '2': the evaluation never "
                      "scores them (more data, or a larger eval_fraction)"]
    assert command_wording("run")(hashed[0]).endswith("(more data, or a larger --eval-fraction)")
