"""The evaluation against the served model, with real TensorFlow SavedModels.

The new model is `trained_model`; the served one is what `export` publishes
(local and on the GCS emulator), or a SavedModel of another signature.
"""

from __future__ import annotations

import os

import pytest

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.evaluate_model.runtime import (
    evaluate, render_report_html, render_report_markdown)
from kfdist.components.evaluate_model.served_outputs import metric_values, served_verdict
from kfdist.components.export_saved_model.runtime import export

QUIET = dict(log=lambda line: None)


@pytest.fixture(scope="module")
def served_base(trained_model, tmp_path_factory) -> str:
    """An export base where `trained_model` is the served version of `digits`."""
    base = str(tmp_path_factory.mktemp("serving"))
    assert export(trained_model, base, serving_model_name="digits", blessed=True, **QUIET).exported
    return base


def test_no_served_model_blesses_on_the_threshold_and_says_so(trained_model, digits_dataset,
                                                               tmp_path):
    result = evaluate(trained_model, digits_dataset, accuracy_threshold=0.5,
                      export_base=str(tmp_path), serving_model_name="digits", **QUIET)
    assert result.blessed and result.served is None
    assert result.reason.endswith(f"no served model under {tmp_path}/digits to compare with")
    assert "served_accuracy" not in metric_values(result) and served_verdict(result) == {}
    assert f"No served model under {tmp_path}/digits" in render_report_html(result, {}, None)
    assert f"No served model under `{tmp_path}/digits`" in render_report_markdown(result)


def test_the_served_model_is_scored_on_the_same_examples(trained_model, digits_dataset,
                                                         served_base):
    result = evaluate(trained_model, digits_dataset, accuracy_threshold=0.5,
                      export_base=served_base, serving_model_name="digits", **QUIET)
    served = result.served
    assert served is not None and served.compared
    # The same weights, fed raw through the serving signature: the same predictions.
    assert served.accuracy == result.accuracy and result.accuracy_change == 0.0
    assert served.loss == pytest.approx(result.loss, rel=1e-4)
    assert result.blessed, result.reason  # not worse is enough by default
    assert f"the served version {served.version} scores" in result.reason
    metrics = metric_values(result)
    assert metrics["served_accuracy"] == result.accuracy and metrics["accuracy_change"] == 0.0
    assert served_verdict(result)["served_path"] == f"{served_base}/digits/{served.version}"
    page = render_report_html(result, {}, None)
    assert "Against the served model" in page and f"Version {served.version}" in page
    assert f"| served accuracy (version {served.version}) |" in render_report_markdown(result)


def test_a_model_not_better_by_min_improvement_is_not_blessed(trained_model, digits_dataset,
                                                              served_base):
    result = evaluate(trained_model, digits_dataset, accuracy_threshold=0.5,
                      export_base=served_base, serving_model_name="digits",
                      min_improvement=0.01, **QUIET)
    assert not result.blessed
    assert "not good enough to replace it" in result.reason
    assert "min_improvement +0.010" in result.reason


def test_a_served_model_on_gcs_is_found_and_compared(trained_model, digits_dataset, served_base,
                                                     gcs_emulator):
    gcs_emulator.create_bucket("models")
    version = sorted(os.listdir(os.path.join(served_base, "digits")))[-1]
    gcs_emulator.upload_dir(os.path.join(served_base, "digits", version),
                            f"gs://models/serving/digits/{version}")
    result = evaluate(trained_model, digits_dataset, accuracy_threshold=0.5,
                      export_base="gs://models/serving", serving_model_name="digits", **QUIET)
    assert result.served.path == f"gs://models/serving/digits/{version}"
    assert result.served.compared and result.served.accuracy == result.accuracy


def test_a_served_model_of_other_inputs_is_named_not_compared(trained_model, digits_dataset,
                                                             tmp_path):
    import tensorflow as tf

    module = tf.Module()
    module.serve = tf.function(lambda x: {"probabilities": tf.nn.softmax(x)},
                               input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    target = tmp_path / "digits" / "7"
    tf.saved_model.save(module, str(target), signatures={"serving_default": module.serve})
    result = evaluate(trained_model, digits_dataset, accuracy_threshold=0.5,
                      export_base=str(tmp_path), serving_model_name="digits", **QUIET)
    assert result.blessed  # the threshold alone, said loudly
    assert result.served.path == f"{tmp_path}/digits/7" and not result.served.compared
    assert f"the served model {tmp_path}/digits/7 could not be compared" in result.reason
    assert "'x' float32 [batch, 3]" in result.reason and "'image' uint8" in result.reason
    assert served_verdict(result)["served_not_compared"] == result.served.mismatch
    assert "could not be compared" in render_report_html(result, {}, None)


def test_a_served_model_of_other_classes_is_not_replaced_unasked(trained_model, digits_dataset,
                                                                served_base, tmp_path):
    import json
    import shutil

    version = sorted(os.listdir(os.path.join(served_base, "digits")))[-1]
    target = tmp_path / "digits" / version
    shutil.copytree(os.path.join(served_base, "digits", version), target)
    info_path = target / "assets.extra" / "kfdist_export.json"
    info = json.loads(info_path.read_text())
    info["class_names"] = info["class_names"][::-1]  # a label vocabulary in another order
    info_path.write_text(json.dumps(info))
    result = evaluate(trained_model, digits_dataset, accuracy_threshold=0.5,
                      export_base=str(tmp_path), serving_model_name="digits", **QUIET)
    assert not result.served.compared and result.served.class_change
    assert result.served.mismatch.startswith("it predicts 10 classes ['9', '8',")
    assert "(the same names in another order)" in result.served.mismatch
    assert not result.blessed and "allow_class_change" in result.reason
    allowed = evaluate(trained_model, digits_dataset, accuracy_threshold=0.5,
                       export_base=str(tmp_path), serving_model_name="digits",
                       allow_class_change=True, **QUIET)
    assert allowed.blessed and "which allow_class_change allows" in allowed.reason
