"""`kfdist run tabular` on scikit-learn's wine: the label's classes from console to export.

Real runs, each a `kfdist run` subprocess (one process trains) into one export base:
1. the three cultivars: the console and `summary.json` describe the label (classes with their
   examples per split); the model is exported;
2. later data without one cultivar, `--allow-anomalies`: the shard step names the missing class,
   the 2-class model clears the threshold but does not replace the 3-class one, and the
   console says why and which flag would;
3. the same with `--allow-class-change`: exported.
"""

import json
import os
import subprocess
import sys

import pytest
import sklearn.datasets

pytestmark = pytest.mark.slow
CULTIVARS = {0: "barolo", 1: "grignolino", 2: "barbera"}
# One served model for both files of the table (a model is served after its data's file name
# unless --serving-model-name says otherwise).
COMMON = ["tabular", "--label-column", "cultivar", "--strategy", "mirrored", "--epochs", "20",
          "--accuracy-threshold", "0.5", "--serving-model-name", "wine"]


def _run(out: str, data: str, *extra: str) -> "tuple[dict, str]":
    proc = subprocess.run([sys.executable, "-m", "kfdist", "run", *COMMON, "--data", data,
                           "--output", out, *extra], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f), proc.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("wine")
    frame = sklearn.datasets.load_wine(as_frame=True).frame
    frame["cultivar"] = frame.pop("target").map(CULTIVARS)
    frame.to_csv(root / "wine.csv", index=False)
    frame[frame.cultivar != "barbera"].to_csv(root / "later.csv", index=False)
    out = str(root / "run")
    first = _run(out, str(root / "wine.csv"))
    second = _run(out, str(root / "later.csv"), "--allow-anomalies")
    third = _run(out, str(root / "later.csv"), "--allow-anomalies", "--allow-class-change")
    return dict(first=first, second=second, third=third)


def test_the_console_and_summary_describe_the_label(runs):
    summary, printed = runs["first"]
    label = summary["label"]
    assert label["column"] == "cultivar" and label["warnings"] == []
    assert [(c["name"], c["train"] + c["eval"]) for c in label["classes"]] == [
        ("barbera", 48), ("barolo", 59), ("grignolino", 71)]
    assert "label 'cultivar': 3 classes: 'barbera' 48 (27%), 'barolo' 59 (33%), " \
           "'grignolino' 71 (40%)" in printed
    assert summary["blessed"] and summary["export"]["exported"]


def test_a_model_without_a_class_does_not_replace_the_served_one(runs):
    summary, printed = runs["second"]
    assert "anomaly: label 'cultivar': 1 class(es) of the reference missing from this data: " \
           "'barbera'" in printed
    assert summary["eval"]["accuracy"] >= 0.5 and not summary["blessed"]
    assert not summary["export"]["exported"]
    assert summary["eval"]["served"]["class_change"] is True
    # summary.json keeps the step's words (the parameter); the console says the flag, once.
    assert summary["eval"]["reason"].endswith("only with allow_class_change=True")
    assert "only with --allow-class-change: not blessed" in printed
    assert "allow_class_change" not in printed
    assert "warning: the served model " in printed and "predicts other classes: it predicts 3 " \
           "classes ['barbera', 'barolo', 'grignolino']; the new model predicts 2" in printed


def test_allow_class_change_exports_it(runs):
    summary, _ = runs["third"]
    assert summary["blessed"] and summary["export"]["exported"]
    assert "which allow_class_change allows" in summary["eval"]["reason"]
    assert [c["name"] for c in summary["label"]["classes"]] == ["barolo", "grignolino"]
