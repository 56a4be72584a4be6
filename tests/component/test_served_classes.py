"""A served model is never replaced by one with other classes unasked, on scikit-learn's wine.

A 3-cultivar model trained on wine is exported (served); later data lacks one
cultivar. The shard step names the missing class against the served model's
data; with `allow_anomalies` a 2-class model trains, and the evaluation does not
bless it over the 3-class one whatever its accuracy, unless `allow_class_change`.
Labels 3, 5, 9 are 3 classes whose names the serving signature returns.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import sklearn.datasets

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.evaluate_model.runtime import (
    evaluate, render_report_html, render_report_markdown)
from kfdist.components.export_saved_model.runtime import export
from kfdist.components.shard_dataset import runtime
from kfdist.components.shard_dataset.validation import DataAnomalyError
from tests.fakes.model_fixture import build_model_artifact

QUIET = dict(log=lambda line: None)
CULTIVARS = {0: "barolo", 1: "grignolino", 2: "barbera"}


def wine_csv(path, labels, keep=None) -> str:
    frame = sklearn.datasets.load_wine(as_frame=True).frame
    frame["target"] = frame["target"].map(labels)
    if keep is not None:
        frame = frame[frame["target"] != keep]
    frame.to_csv(path, index=False)
    return str(path)


def shard_and_train(source: str, root, **shard_args):
    dataset = str(root / "dataset")
    runtime.shard(source, dataset, label_column="target", num_shards=2, **shard_args, **QUIET)
    return dataset, build_model_artifact(dataset, str(root / "model"), epochs=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """An export base serving a 3-cultivar wine model as `wine`."""
    root = tmp_path_factory.mktemp("served")
    _, model = shard_and_train(wine_csv(root / "wine.csv", CULTIVARS), root)
    base = str(root / "serving")
    assert export(model, base, serving_model_name="wine", blessed=True, **QUIET).exported
    return base


def test_a_model_that_lost_a_class_does_not_replace_the_served_one(served, tmp_path):
    source = wine_csv(tmp_path / "later.csv", CULTIVARS, keep="barbera")
    lines = []
    with pytest.raises(DataAnomalyError):
        runtime.shard(source, str(tmp_path / "refused"), label_column="target",
                      export_base=served, serving_model_name="wine", log=lines.append)
    assert any(line.startswith("anomaly: label 'target': 1 class(es) of the reference missing "
                               "from this data: 'barbera'") for line in lines), lines
    dataset, model = shard_and_train(source, tmp_path, export_base=served,
                                     serving_model_name="wine", allow_anomalies=True)
    result = evaluate(model, dataset, accuracy_threshold=0.5, export_base=served,
                      serving_model_name="wine", **QUIET)
    assert result.accuracy >= 0.9  # good enough on its own classes
    assert not result.blessed
    assert result.served.class_change and result.served.mismatch == (
        "it predicts 3 classes ['barbera', 'barolo', 'grignolino']; the new model predicts 2 "
        "(gone: ['barbera'])")
    assert result.reason.endswith("a model with other classes replaces it only with "
                                  "allow_class_change=True")
    assert "the new model is not blessed" in render_report_html(result, {}, None)
    assert "predicts other classes" in render_report_markdown(result)
    allowed = evaluate(model, dataset, accuracy_threshold=0.5, export_base=served,
                       serving_model_name="wine", allow_class_change=True, **QUIET)
    assert allowed.blessed and "which allow_class_change allows" in allowed.reason


def test_number_labels_are_classes_named_in_the_serving_signature(tmp_path):
    import tensorflow as tf

    source = wine_csv(tmp_path / "wine.csv", {0: 9, 1: 3, 2: 5})
    dataset, model = shard_and_train(source, tmp_path)
    record = export(model, str(tmp_path / "serving"), serving_model_name="wine", blessed=True,
                    **QUIET)
    serve = tf.saved_model.load(record.path).signatures["serving_default"]
    frame = sklearn.datasets.load_wine(as_frame=True).frame
    features = frame.drop(columns="target")
    out = serve(**{name: tf.constant(features[name].to_numpy(np.float32))
                   for name in features.columns})
    assert out["probabilities"].shape == (178, 3)  # 3 outputs, not 10
    info = json.loads(open(os.path.join(record.path, "assets.extra", "kfdist_export.json")).read())
    assert info["class_names"] == ["3", "5", "9"] and info["classes_counted"] is True
    names = [n.decode() for n in out["class_names"].numpy()]
    assert names == [["3", "5", "9"][i] for i in out["class_ids"].numpy()]
    expected = frame["target"].map({0: "9", 1: "3", 2: "5"})
    assert np.mean(np.array(names) == expected.to_numpy()) > 0.9


@pytest.fixture(scope="module")
def lost_class(tmp_path_factory):
    """A 2-cultivar wine dataset (barbera gone) and its model."""
    root = tmp_path_factory.mktemp("lost")
    return shard_and_train(wine_csv(root / "later.csv", CULTIVARS, keep="barbera"), root)


def _rewritten_export(served, root, change) -> str:
    """A copy of the served export base whose export record `change` rewrites."""
    base = str(root / "serving")
    shutil.copytree(served, base)
    version = next(os.scandir(os.path.join(base, "wine"))).path
    path = os.path.join(version, "assets.extra", "kfdist_export.json")
    with open(path) as f:
        info = json.load(f)
    with open(path, "w") as f:
        json.dump(change(info), f)
    return base


def test_a_served_model_without_class_names_is_told_apart_by_its_outputs(served, lost_class,
                                                                        tmp_path):
    base = _rewritten_export(served, tmp_path, lambda info: {
        k: v for k, v in info.items() if k != "class_names"})
    dataset, model = lost_class
    result = evaluate(model, dataset, accuracy_threshold=0.5, export_base=base,
                      serving_model_name="wine", **QUIET)
    assert not result.blessed
    assert result.served.class_change
    assert result.served.mismatch == "it predicts 3 classes; the new model predicts 2"


def test_an_export_from_before_classes_were_counted_says_its_ids_run_to_the_max(
        served, tmp_path):
    """Such an export of labels 1 and 2 named ids 0..2; the new model's classes are 1 and 2."""
    base = _rewritten_export(served, tmp_path, lambda info: {
        **{k: v for k, v in info.items() if k != "classes_counted"},
        "class_names": ["0", "1", "2"]})
    dataset, model = shard_and_train(wine_csv(tmp_path / "w12.csv", {0: 1, 1: 2, 2: 3}, keep=3),
                                     tmp_path)
    result = evaluate(model, dataset, accuracy_threshold=0.5, export_base=base,
                      serving_model_name="wine", **QUIET)
    assert not result.blessed and result.served.class_change
    assert result.served.mismatch == (
        "it predicts 3 classes ['0', '1', '2']; the new model predicts 2 (gone: ['0']); it was "
        "exported before classes were counted: its ids run 0..max of its number labels, "
        "whichever occurred")
