"""A served model is never replaced by one with other classes unasked, on scikit-learn's wine.

A 3-cultivar model trained on wine is exported (served); later data lacks one
cultivar. The shard step names the missing class against the served model's
data; with `allow_anomalies` a 2-class model trains, and the evaluation does not
bless it over the 3-class one whatever its accuracy, unless `allow_class_change`.
Labels 3, 5, 9 are 3 classes whose names the serving signature returns.
"""

from __future__ import annotations

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
    assert result.reason.endswith("a model with other classes replaces it only when "
                                  "allow_class_change is set (kfdist run --allow-class-change)")
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
    names = [n.decode() for n in out["class_names"].numpy()]
    assert set(names) <= {"3", "5", "9"}
    expected = frame["target"].map({0: "9", 1: "3", 2: "5"})
    assert np.mean(np.array(names) == expected.to_numpy()) > 0.9
