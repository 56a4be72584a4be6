"""evaluate_model and export_saved_model runtimes, with real TensorFlow.

The model artifact comes from `model_fixture` (a small Keras MLP trained on
`digits_dataset`), so these tests do not depend on the trainer component.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.common import dataset_spec as ds
from kfdist.components.common import eval_predictions
from kfdist.components.common import model_artifact as ma
from kfdist.components.common import storage
from kfdist.components.common.dataset_statistics import EXPORTED_DATASET_DIR
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.evaluate_model.runtime import (
    evaluate, predict_classes, render_report_html, render_report_markdown)
from kfdist.components.export_saved_model.runtime import EXPORT_INFO_FILE, export

QUIET = dict(log=lambda line: None)
DATA_URI = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def _chromium() -> str:
    """The headless browser the visual check renders the report with (the set-up installs it)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, ("Chromium is missing: the test set-up installs it (`apt-get install chromium`, "
                   "as .ci/system-packages.sh does)")
    return found


def _raw_eval(dataset_dir):
    """Raw eval inputs and labels, in shard order, read without the runtime."""
    import tensorflow as tf

    from kfdist.components.common import tf_features

    meta = ds.load_metadata(dataset_dir)
    data = tf.data.TFRecordDataset(meta.shard_paths(dataset_dir, "eval")).batch(10_000)
    x, y = next(iter(data.map(tf_features.parse_fn(meta))))
    return x.numpy(), y.numpy()


def _confusion(labels, preds, k=10):
    cm = np.zeros((k, k), dtype=np.int64)
    np.add.at(cm, (labels, preds), 1)
    return cm.tolist()


def _tree_digest(root):
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            path = os.path.join(d, name)
            out[os.path.relpath(path, root)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def evaluation(trained_model, digits_dataset):
    return evaluate(trained_model, digits_dataset, accuracy_threshold=0.5, **QUIET)


# ---------------------------------------------------------------- evaluate


def test_metrics_match_numpy_recomputation(evaluation, trained_model, digits_dataset):
    import tensorflow as tf

    raw, labels = _raw_eval(digits_dataset)
    preds = predict_classes(trained_model, digits_dataset)
    assert preds.shape == labels.shape and preds.dtype == np.int64
    assert evaluation.num_examples == len(labels) == ds.load_metadata(digits_dataset).splits["eval"].num_examples
    assert evaluation.accuracy == float(np.mean(preds == labels))
    cm = np.asarray(evaluation.confusion_matrix)
    assert cm.sum() == evaluation.num_examples
    assert np.trace(cm) / cm.sum() == evaluation.accuracy
    assert evaluation.confusion_matrix == _confusion(labels, preds)
    model = tf.keras.models.load_model(os.path.join(trained_model, ma.SAVED_MODEL_DIR))
    probs = model.predict(raw.astype(np.float32) / 255.0, verbose=0)
    expected_loss = float(tf.keras.losses.sparse_categorical_crossentropy(labels, probs).numpy().mean())
    assert evaluation.loss == pytest.approx(expected_loss, rel=1e-4)
    assert evaluation.class_names == [str(i) for i in range(10)]
    for i, c in enumerate(evaluation.per_class):
        assert c.support == cm[i].sum()
        assert c.recall == pytest.approx(cm[i, i] / cm[i].sum())
        assert c.precision == pytest.approx(cm[i, i] / cm[:, i].sum())
    assert evaluation.accuracy > 0.8  # the small MLP learns the digits
    assert json.loads(evaluation.to_json())["confusion_matrix"] == evaluation.confusion_matrix


def test_threshold_decides_blessing(evaluation, trained_model, digits_dataset):
    acc = evaluation.accuracy
    assert evaluation.blessed and "≥ threshold 0.500" in evaluation.reason
    above = evaluate(trained_model, digits_dataset, accuracy_threshold=min(1.0, acc + 0.01), **QUIET)
    assert not above.blessed and " < threshold " in above.reason and above.accuracy == acc
    exact = evaluate(trained_model, digits_dataset, accuracy_threshold=acc, **QUIET)
    assert exact.blessed


@pytest.mark.parametrize("threshold", [-0.1, 1.5, "0.9", True])
def test_invalid_threshold(threshold, trained_model, digits_dataset):
    with pytest.raises(InvalidInputError, match="accuracy_threshold"):
        evaluate(trained_model, digits_dataset, accuracy_threshold=threshold, **QUIET)


def test_missing_dirs_and_mismatched_dataset(trained_model, digits_dataset, tmp_path):
    with pytest.raises(InvalidInputError, match="no-such-model"):
        evaluate(str(tmp_path / "no-such-model"), digits_dataset, **QUIET)
    with pytest.raises(InvalidInputError, match="no-such-data"):
        evaluate(trained_model, str(tmp_path / "no-such-data"), **QUIET)
    other = tmp_path / "other"
    shutil.copytree(digits_dataset, other)
    meta = json.loads((other / ds.METADATA_FILE).read_text())
    meta["feature"]["shape"] = [14, 56]
    (other / ds.METADATA_FILE).write_text(json.dumps(meta))
    with pytest.raises(InvalidInputError, match="feature"):
        evaluate(trained_model, str(other), **QUIET)


# ------------------------------------------------ predictions kept by the trainer


@pytest.fixture
def kept_model(trained_model, digits_dataset, tmp_path):
    """A copy of the model artifact holding the trainer's kept predictions."""
    model_dir = str(tmp_path / "kept")
    shutil.copytree(trained_model, model_dir)
    accuracy = eval_predictions.record(model_dir, digits_dataset, ds.load_metadata(digits_dataset))
    assert accuracy is not None and os.path.isfile(os.path.join(model_dir, ma.EVAL_PREDICTIONS_FILE))
    return model_dir


_EVALUATE_WITHOUT_TF = """
import json, sys
from kfdist.components.evaluate_model.runtime import evaluate
lines = []
result = evaluate(sys.argv[1], sys.argv[2], accuracy_threshold=0.5, log=lines.append)
print(json.dumps({"result": json.loads(result.to_json()), "lines": lines,
                  "tensorflow_loaded": "tensorflow" in sys.modules}))
"""


def test_kept_predictions_evaluate_alike_without_tensorflow(kept_model, evaluation, digits_dataset):
    done = subprocess.run([sys.executable, "-c", _EVALUATE_WITHOUT_TF, kept_model, digits_dataset],
                          capture_output=True, text=True, check=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["tensorflow_loaded"] is False
    assert any(ma.EVAL_PREDICTIONS_FILE in line for line in out["lines"]), out["lines"]
    kept = out["result"]
    assert kept["confusion_matrix"] == evaluation.confusion_matrix
    assert kept["accuracy"] == evaluation.accuracy and kept["blessed"] == evaluation.blessed
    assert kept["loss"] == pytest.approx(evaluation.loss, rel=1e-5)


def _tampered(model_dir):
    """Rewrites the kept predictions, keys unchanged, to say every prediction is class 0."""
    path = os.path.join(model_dir, ma.EVAL_PREDICTIONS_FILE)
    with np.load(path) as kept:
        arrays = dict(kept)
    arrays["predicted"] = np.zeros_like(arrays["predicted"])
    np.savez(path, **arrays)
    return float(np.mean(arrays["labels"] == 0))


def _reversed_eval_shards(dataset_dir, out):
    """A copy of the dataset whose eval shards hold the same records in reverse order."""
    import tensorflow as tf

    shutil.copytree(dataset_dir, out)
    meta = ds.load_metadata(str(out))
    for path in meta.shard_paths(str(out), "eval"):
        records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
        with tf.io.TFRecordWriter(path) as writer:
            for record in reversed(records):
                writer.write(record)
    return str(out)


def test_kept_predictions_are_used_only_for_their_model_and_shards(
        kept_model, evaluation, digits_dataset, tmp_path):
    from tensorflow.core.protobuf import fingerprint_pb2

    zeros_accuracy = _tampered(kept_model)  # tells the kept predictions from fresh ones
    assert evaluate(kept_model, digits_dataset, **QUIET).accuracy == zeros_accuracy
    # The same records in another order: other shards, so predicted afresh.
    lines = []
    reordered = _reversed_eval_shards(digits_dataset, tmp_path / "reordered")
    fresh = evaluate(kept_model, reordered, log=lines.append)
    assert fresh.confusion_matrix == evaluation.confusion_matrix
    assert not any(ma.EVAL_PREDICTIONS_FILE in line for line in lines)
    # Another SavedModel fingerprint (a replaced model): predicted afresh.
    path = os.path.join(kept_model, ma.SAVED_MODEL_DIR, "fingerprint.pb")
    fingerprint = fingerprint_pb2.FingerprintDef.FromString(open(path, "rb").read())
    fingerprint.saved_model_checksum += 1
    with open(path, "wb") as f:
        f.write(fingerprint.SerializeToString())
    assert evaluate(kept_model, digits_dataset, **QUIET).accuracy == evaluation.accuracy


def test_kept_predictions_are_not_used_once_the_variables_are_replaced(
        kept_model, trained_model, digits_dataset, tmp_path):
    """Other weights in `variables/`, the old `fingerprint.pb` kept: predicted afresh."""
    import tensorflow as tf

    _tampered(kept_model)  # the kept predictions now say class 0 throughout
    other = str(tmp_path / "other")
    shutil.copytree(trained_model, other)
    model = tf.keras.models.load_model(os.path.join(other, ma.SAVED_MODEL_DIR))
    model.optimizer.build(model.trainable_variables)  # saved with every variable the original has
    weights = model.get_weights()
    model.set_weights(weights[:-2] + [w[..., ::-1] for w in weights[-2:]])  # classes reversed
    tf.keras.models.save_model(model, os.path.join(other, ma.SAVED_MODEL_DIR))
    variables = os.path.join(kept_model, ma.SAVED_MODEL_DIR, "variables")
    shutil.rmtree(variables)
    shutil.copytree(os.path.join(other, ma.SAVED_MODEL_DIR, "variables"), variables)
    expected = evaluate(other, digits_dataset, **QUIET)
    swapped = evaluate(kept_model, digits_dataset, **QUIET)
    assert swapped.confusion_matrix == expected.confusion_matrix
    assert swapped.accuracy == expected.accuracy
    assert any(any(row[1:]) for row in swapped.confusion_matrix)  # not the kept all-class-0


def test_html_report_embeds_pngs(evaluation, trained_model, tmp_path):
    from PIL import Image

    page = render_report_html(evaluation, ma.read_history(trained_model),
                              ma.read_training_report(trained_model))
    pngs = [base64.b64decode(m, validate=True) for m in DATA_URI.findall(page)]
    assert len(pngs) == 2  # training curves and confusion matrix
    for png in pngs:
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        img = Image.open(io.BytesIO(png))
        img.verify()
        assert min(img.size) > 200
    for text in ("Blessed", evaluation.reason, "MirroredStrategy", "examples/s", "precision"):
        assert text in page
    assert "http://" not in page and "https://" not in page  # self-contained

    rejected = dataclasses.replace(evaluation, blessed=False, reason="accuracy 0.5 < threshold 0.9")
    bare = render_report_html(rejected, {}, None)
    assert len(DATA_URI.findall(bare)) == 1 and "No training history" in bare
    assert "Not blessed: accuracy 0.5 &lt; threshold 0.9" in bare

    md = render_report_markdown(evaluation)
    assert evaluation.reason in md and f"{evaluation.accuracy:.4f}" in md

    html_path, shot = tmp_path / "report.html", tmp_path / "report.png"
    html_path.write_text(page, encoding="utf-8")
    subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=1100,1800", html_path.as_uri()],
                   check=True, capture_output=True, timeout=60)
    img = np.asarray(Image.open(shot).convert("L"))
    assert img.shape == (1800, 1100)
    assert img.std() > 10  # something was drawn, not a blank page


def _second_line_pixels(png: bytes) -> int:
    """Pixels in matplotlib's second default line colour (C1, #ff7f0e): the validation curve."""
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    return int((np.abs(rgb - np.array([255, 127, 14])).sum(axis=2) < 40).sum())


def test_html_report_draws_validation_curves_when_history_has_them(evaluation, trained_model):
    history = ma.read_history(trained_model)
    epochs = len(history["loss"])
    with_validation = dict(history, val_loss=[0.9 / (e + 1) for e in range(epochs)],
                           val_accuracy=[0.5 + 0.1 * e for e in range(epochs)])
    curves = {}
    for name, hist in (("training only", history), ("with validation", with_validation)):
        page = render_report_html(evaluation, hist, ma.read_training_report(trained_model))
        pngs = [base64.b64decode(m) for m in DATA_URI.findall(page)]
        assert len(pngs) == 2  # training curves and confusion matrix
        curves[name] = _second_line_pixels(pngs[0])
    assert curves["training only"] == 0
    assert curves["with validation"] > 100  # a second line in each panel, and its legend entry


# ---------------------------------------------------------------- export


@pytest.fixture(scope="module")
def exported(trained_model, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("serving"))
    result = export(trained_model, base, blessed=True, blessing_reason="accuracy ok", version=3, **QUIET)
    return base, result


def test_serving_signature_matches_evaluation(exported, evaluation, digits_dataset):
    import tensorflow as tf

    base, result = exported
    assert result.exported and result.version == 3 and result.path == os.path.join(base, "mnist", "3")
    assert sorted(os.listdir(os.path.join(base, "mnist"))) == ["3"]  # no temporary left behind
    assert os.stat(result.path).st_mode & 0o755 == 0o755  # readable by a serving process
    serve = tf.saved_model.load(result.path).signatures["serving_default"]
    _, inputs = serve.structured_input_signature
    assert inputs["image"].dtype == tf.uint8 and inputs["image"].shape.as_list() == [None, 28, 28]
    raw, labels = _raw_eval(digits_dataset)
    out = serve(image=tf.constant(raw, tf.uint8))
    assert out["class_ids"].dtype == tf.int64 and out["probabilities"].dtype == tf.float32
    probs = out["probabilities"].numpy()
    assert probs.shape == (len(labels), 10)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert _confusion(labels, out["class_ids"].numpy()) == evaluation.confusion_matrix
    # MNIST's classes are named by their digits
    assert out["class_names"].dtype == tf.string
    assert [n.decode() for n in out["class_names"].numpy()] == [
        str(i) for i in out["class_ids"].numpy()]
    info = json.load(open(os.path.join(result.path, "assets.extra", EXPORT_INFO_FILE)))
    assert info["class_names"] == [str(i) for i in range(10)] and info["version"] == 3
    assert info["signature"]["outputs"]["class_names"] == {"dtype": "string", "shape": [None]}
    assert info["feature"]["key"] == "image" and info["preprocessing"]["kind"] == "scale"
    # the spec of the dataset the model was trained on travels with it (images: no statistics)
    trained_on = os.path.join(result.path, EXPORTED_DATASET_DIR)
    assert ds.load_metadata(trained_on) == ds.load_metadata(digits_dataset)
    assert sorted(os.listdir(trained_on)) == [ds.METADATA_FILE]


def test_the_signature_names_each_class_from_the_label_vocabulary(trained_model, digits_dataset,
                                                                 tmp_path):
    import tensorflow as tf

    from kfdist.components.common import serving_model

    names = tuple(f"class-{chr(ord('a') + i)}" for i in range(10))  # string labels, e.g. a CSV's
    with open(os.path.join(trained_model, ma.DATASET_METADATA_FILE)) as f:
        meta = dataclasses.replace(ds.DatasetMetadata.from_json(f.read()), class_names=names)
    out_dir = str(tmp_path / "serving")
    serving_model.save_serving_model(os.path.join(trained_model, ma.SAVED_MODEL_DIR), meta, out_dir)
    raw, _ = _raw_eval(digits_dataset)
    out = tf.saved_model.load(out_dir).signatures["serving_default"](image=tf.constant(raw[:50]))
    ids = out["class_ids"].numpy()
    assert len(set(ids)) > 1
    assert [n.decode() for n in out["class_names"].numpy()] == [names[i] for i in ids]


def test_existing_version_is_refused_and_untouched(exported, trained_model):
    base, result = exported
    before = _tree_digest(result.path)
    with pytest.raises(InvalidInputError, match="already exists"):
        export(trained_model, base, blessed=True, version=3, **QUIET)
    with pytest.raises(InvalidInputError, match="latest version 3"):
        export(trained_model, base, blessed=True, version=2, **QUIET)
    assert _tree_digest(result.path) == before
    assert sorted(os.listdir(os.path.join(base, "mnist"))) == ["3"]


def test_not_blessed_writes_nothing(trained_model, tmp_path):
    base = tmp_path / "serving"
    result = export(trained_model, str(base), blessed=False,
                    blessing_reason="accuracy 0.412 < threshold 0.900", **QUIET)
    assert not result.exported and result.path is None and result.version is None
    assert "accuracy 0.412 < threshold 0.900" in result.reason
    assert not base.exists()


def test_export_copies_the_serving_model_without_tensorflow(trained_model, tmp_path):
    code = ("import sys\n"
            "from kfdist.components.export_saved_model.runtime import export\n"
            "export(sys.argv[1], sys.argv[2], blessed=True, version=1, log=lambda line: None)\n"
            "assert 'tensorflow' not in sys.modules, 'the export imported TensorFlow'\n")
    done = subprocess.run([sys.executable, "-c", code, trained_model, str(tmp_path / "serving")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    version = tmp_path / "serving" / "mnist" / "1"
    published = {k: v for k, v in _tree_digest(str(version)).items()
                 if not k.startswith("assets.extra")}
    assert published == _tree_digest(os.path.join(trained_model, ma.SERVING_MODEL_DIR))
    assert (version / "assets.extra" / EXPORT_INFO_FILE).is_file()


def test_artifact_without_serving_model_is_exported_from_its_keras_model(
        trained_model, evaluation, digits_dataset, tmp_path):
    import tensorflow as tf

    older = tmp_path / "model"
    shutil.copytree(trained_model, older, ignore=shutil.ignore_patterns(ma.SERVING_MODEL_DIR))
    result = export(str(older), str(tmp_path / "serving"), blessed=True, version=1, **QUIET)
    serve = tf.saved_model.load(result.path).signatures["serving_default"]
    raw, labels = _raw_eval(digits_dataset)
    assert _confusion(labels, serve(image=tf.constant(raw))["class_ids"].numpy()) == \
        evaluation.confusion_matrix
    assert sorted(os.listdir(older)) == sorted(set(os.listdir(trained_model)) - {ma.SERVING_MODEL_DIR})


@pytest.mark.parametrize("kwargs, match", [
    (dict(serving_model_name="a/b"), "serving_model_name"),
    (dict(serving_model_name=""), "serving_model_name"),
    (dict(serving_model_name=".."), "serving_model_name"),
    (dict(version=0), "version=0"),
    (dict(version=-5), "version=-5"),
    (dict(export_base=""), "export_base"),
])
def test_export_rejects_invalid_arguments(kwargs, match, trained_model, tmp_path):
    args = dict(export_base=str(tmp_path / "serving"), blessed=True)
    args.update(kwargs)
    with pytest.raises(InvalidInputError, match=match):
        export(trained_model, args.pop("export_base"), **args, **QUIET)
    assert not (tmp_path / "serving").exists()
    with pytest.raises(InvalidInputError, match="no-model"):
        export(str(tmp_path / "no-model"), str(tmp_path / "serving"), blessed=True, **QUIET)


# ---------------------------------------------------------------- gs://


def test_export_to_gcs(gcs_emulator, trained_model, evaluation, digits_dataset, tmp_path):
    import tensorflow as tf

    gcs_emulator.create_bucket("evaluate-export-models")
    base = "gs://evaluate-export-models/serving"
    result = export(trained_model, base, serving_model_name="digits", blessed=True, version=7, **QUIET)
    assert result.exported and result.path == f"{base}/digits/7"
    names = storage.list_uris(base)
    assert f"{base}/digits/7/saved_model.pb" in names
    assert f"{base}/digits/7/assets.extra/{EXPORT_INFO_FILE}" in names
    assert f"{base}/digits/7/{EXPORTED_DATASET_DIR}/{ds.METADATA_FILE}" in names
    local = storage.stage_locally(result.path, str(tmp_path))
    serve = tf.saved_model.load(local).signatures["serving_default"]
    raw, labels = _raw_eval(digits_dataset)
    preds = serve(image=tf.constant(raw))["class_ids"].numpy()
    assert _confusion(labels, preds) == evaluation.confusion_matrix
    with pytest.raises(InvalidInputError, match="already exists"):
        export(trained_model, base, serving_model_name="digits", blessed=True, version=7, **QUIET)
    later = export(trained_model, base, serving_model_name="digits", blessed=False, **QUIET)
    assert not later.exported and storage.list_uris(base) == names


def test_export_of_a_model_on_gcs(gcs_emulator, trained_model, evaluation, digits_dataset, tmp_path):
    import tensorflow as tf

    gcs_emulator.create_bucket("evaluate-export-artifacts")
    model_uri = "gs://evaluate-export-artifacts/run-1/model"
    storage.upload_dir(trained_model, model_uri)
    result = export(model_uri, str(tmp_path / "serving"), blessed=True, version=2, **QUIET)
    serve = tf.saved_model.load(result.path).signatures["serving_default"]
    raw, labels = _raw_eval(digits_dataset)
    assert _confusion(labels, serve(image=tf.constant(raw))["class_ids"].numpy()) == \
        evaluation.confusion_matrix
    info = json.load(open(os.path.join(result.path, "assets.extra", EXPORT_INFO_FILE)))
    assert info["model_source"] == model_uri
    with pytest.raises(InvalidInputError, match="run-2/model.*has no dataset_metadata.json"):
        export("gs://evaluate-export-artifacts/run-2/model", str(tmp_path / "serving"),
               blessed=True, **QUIET)
    assert os.listdir(tmp_path / "serving" / "mnist") == ["2"]


def test_a_model_that_does_not_load_back_leaves_the_prediction_to_evaluate_model(
        digits_dataset, tmp_path, capsys):
    import types

    from kfdist.components.train_distributed.replica import train

    model_dir = tmp_path / "model"
    (model_dir / ma.SAVED_MODEL_DIR).mkdir(parents=True)
    (model_dir / ma.SAVED_MODEL_DIR / "fingerprint.pb").write_bytes(b"not a model")
    job = types.SimpleNamespace(model_dir=str(model_dir), dataset_dir=digits_dataset)
    train._keep_eval_predictions(job, ds.load_metadata(digits_dataset))  # logs, does not raise
    assert "did not keep eval-split predictions" in capsys.readouterr().out
    assert not (model_dir / ma.EVAL_PREDICTIONS_FILE).exists()
