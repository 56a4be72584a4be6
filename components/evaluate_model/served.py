"""The served model, scored on the same held-out split as the new one.

The served model is the latest exported version under the export base and
model name the export step writes to (`common/serving_versions`). It is a
TF Serving SavedModel whose `serving_default` signature takes raw inputs
(`common/serving_inputs`) and returns `probabilities`; the eval shards are
parsed to raw inputs and fed to it as a serving client would (encoded-image
datasets as PNG, which decodes to the very pixels the shards hold). Its
predictions go through the same metrics and slices as the new model's.

A version that TF Serving could not serve on this dataset (no SavedModel,
no `serving_default`, other inputs) is named with what it takes and what the
dataset holds, and not scored (`verdict.ServedModel.mismatch`); so is one
that predicts other classes than the new model (its export record's class
names, or its number of outputs), which the verdict then never replaces
unasked (`verdict.ServedModel.class_change`).
"""

from __future__ import annotations

import json
import os
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.common import dataset_spec as ds
from kfdist.components.common import eval_predictions as ep
from kfdist.components.common import serving_inputs as si
from kfdist.components.common import serving_versions, signature_check, storage
from kfdist.components.common.serving_inputs import VALUE_OUTPUT
from kfdist.components.evaluate_model.regression_metrics import regression_metrics
from kfdist.components.evaluate_model import slices as sl
from kfdist.components.evaluate_model import verdict as vd
from kfdist.components.evaluate_model.verdict import ServedModel
from kfdist.components.export_saved_model.runtime import EXPORT_INFO_FILE

#: The export's description of itself.
_EXPORT_INFO = os.path.join("assets.extra", EXPORT_INFO_FILE)


def _served_classes(local: str) -> Tuple[Optional[List[str]], bool]:
    """The classes an exported version predicts, as its export record names them (None:
    exported without one), and whether that export counted its classes (one whose
    dataset did not named every id up to its largest number label `0`, `1`, ...)."""
    info_path = os.path.join(local, _EXPORT_INFO)
    if not os.path.isfile(info_path):
        return None, False
    with open(info_path) as f:
        info = json.load(f)
    names = info.get("class_names")
    return (None if names is None else [str(n) for n in names]), bool(
        info.get("classes_counted"))


def _class_change(local: str, meta: ds.DatasetMetadata) -> Optional[str]:
    """How the served version's classes differ from the new model's (None: the same, or not
    recorded); an export whose ids are its numbers 0..max, from before classes were
    counted, is said to be one."""
    served, counted = _served_classes(local)
    if meta.is_regression and served is not None:
        return f"it predicts {len(served)} classes; the new model predicts a number"
    change = vd.class_change(served, list(ds.display_class_names(meta)))
    if change is None or counted or served != [str(i) for i in range(len(served))]:
        return change
    return (f"{change}; it was exported before classes were counted: its ids run 0..max of "
            "its number labels, whichever occurred")


def _output_mismatch(loaded, meta: ds.DatasetMetadata) -> Tuple[Optional[str], bool]:
    """Why the loaded serving model's outputs do not fit the dataset's classes (None: they
    do), and whether it is that it predicts another number of classes. (Its inputs were
    checked before it was loaded: `signature_check.mismatch`.)"""
    signature = loaded.signatures.get(si.SIGNATURE_NAME)
    if signature is None:
        return (f"it has no {si.SIGNATURE_NAME!r} signature (it has "
                f"{sorted(loaded.signatures)})"), False
    outputs = signature.structured_outputs
    if meta.is_regression:
        if VALUE_OUTPUT in outputs:
            return None, False
        return (f"its signature returns {sorted(outputs)}: it predicts classes, the new model "
                f"a number ({VALUE_OUTPUT!r})"), "probabilities" in outputs
    if VALUE_OUTPUT in outputs and "probabilities" not in outputs:
        return (f"it predicts a number ({VALUE_OUTPUT!r}), the new model classes: it is a "
                "regression's"), True
    if "probabilities" not in outputs:
        return f"its signature returns {sorted(outputs)}, not 'probabilities'", False
    classes = outputs["probabilities"].shape[-1]
    if classes is not None and classes != meta.num_classes:
        return (f"it predicts {classes} classes; the new model predicts {meta.num_classes}",
                True)
    return None, False


def _serving_feed(meta: ds.DatasetMetadata) -> Callable:
    """Raw input (as `tf_features.parse_fn` gives it, batched) → the serving signature's inputs."""
    import tensorflow as tf

    inputs = si.serving_inputs(meta)
    feature = meta.feature
    if feature.key == ds.IMAGE_KEY and feature.encoding:
        shape = list(feature.shape) + ([1] if len(feature.shape) == 2 else [])
        return lambda raw: {inputs[0].name: tf.map_fn(
            lambda image: tf.io.encode_png(tf.reshape(image, shape)), raw,
            fn_output_signature=tf.string)}
    if feature.key == ds.IMAGE_KEY:
        return lambda raw: {inputs[0].name: raw}
    numeric = [i.name for i in inputs if i.kind == si.NUMERIC]
    strings = [i.name for i in inputs if i.kind == si.CATEGORICAL]

    def table(raw):
        x = raw[ds.FEATURES_KEY] if strings else raw
        feed = {name: x[:, i] for i, name in enumerate(numeric)}
        feed.update({name: raw[ds.CATEGORICAL_KEY][:, i] for i, name in enumerate(strings)})
        return feed

    return table


def _predict(loaded, meta: ds.DatasetMetadata, dataset_dir: str,
             batch_size: int) -> ep.EvalPredictions:
    """The served model's predictions on the eval split, in shard order."""
    import tensorflow as tf

    from kfdist.components.common import tf_features

    serve = loaded.signatures[si.SIGNATURE_NAME]
    parse, feed = tf_features.parse_fn(meta), _serving_feed(meta)
    data = (tf.data.TFRecordDataset(meta.shard_paths(dataset_dir, ep.EVAL_SPLIT),
                                    compression_type=tf_features.compression_type(meta))
            .batch(batch_size).map(parse).with_options(tf_features.pipeline_options()))
    labels: List[np.ndarray] = []
    probabilities: List[np.ndarray] = []
    output = VALUE_OUTPUT if meta.is_regression else "probabilities"
    for raw, label in data:
        probabilities.append(serve(**feed(raw))[output].numpy().astype(np.float32))
        labels.append(label.numpy())
    if meta.is_regression:
        return ep.EvalPredictions.from_values(np.concatenate(labels),
                                              np.concatenate(probabilities))
    return ep.EvalPredictions.from_probabilities(np.concatenate(labels), np.concatenate(probabilities))


def _stage(found: serving_versions.ServedVersion, work: str) -> str:
    if not storage.is_remote(found.path):
        return found.path
    return storage.copy_dir_from(found.path, os.path.join(work, "served", str(found.version)))


def _loaded(local: str, meta: ds.DatasetMetadata) -> Tuple[object, Optional[str], bool]:
    """The served version loaded as TF Serving would, or why it cannot be scored on this
    dataset: `(loaded, None, False)` or `(None, why, whether it predicts other classes)`."""
    if not os.path.isfile(os.path.join(local, "saved_model.pb")):
        return None, "it holds no saved_model.pb, so TF Serving cannot load it", False
    from google.protobuf.message import DecodeError

    try:
        mismatch = signature_check.mismatch(local, meta, served=True)
    except (OSError, DecodeError) as err:
        mismatch = f"its saved_model.pb could not be read: {err}"
    if mismatch is not None:
        return None, mismatch, False
    import tensorflow as tf

    try:
        loaded = tf.saved_model.load(local)
    except (OSError, ValueError, tf.errors.OpError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return None, f"it could not be loaded: {first}", False
    mismatch, other_classes = _output_mismatch(loaded, meta)
    return (None, mismatch, other_classes) if mismatch is not None else (loaded, None, False)


def score_served(export_base: str, serving_model_name: str, meta: ds.DatasetMetadata,
                 dataset_dir: str, slice_columns: Sequence[str], work: str, *,
                 batch_size: int = ep.EVAL_BATCH,
                 log: Callable[[str], None] = print) -> Tuple[Optional[ServedModel], str]:
    """Finds the served model and scores it on the dataset's eval split and slices.

    Args:
      export_base: The export step's base (local or remote); empty: none, nothing compared.
      serving_model_name: The model's name under it.
      meta: The dataset's metadata.
      dataset_dir: The local dataset directory.
      slice_columns: The columns the new model's metrics are sliced by.
      work: A local scratch directory (a remote version is downloaded into it).
      batch_size: Examples per prediction batch.
      log: Receives progress lines.

    Returns:
      The served model (None when none is served) and where it was looked for
      (`<export_base>/<name>`; empty without an export base).
    """
    if not export_base:
        return None, ""
    root = serving_versions.model_root(export_base, serving_model_name)
    found = serving_versions.served_version(export_base, serving_model_name)
    if found is None:
        log(f"no served model under {root}: the threshold alone decides")
        return None, root
    local = _stage(found, work)
    change = _class_change(local, meta)
    if change is not None:
        return _not_compared(found, change, log, class_change=True), root
    loaded, mismatch, other_classes = _loaded(local, meta)
    if mismatch is not None:
        return _not_compared(found, mismatch, log, class_change=other_classes), root
    log(f"scoring the served model {found.path} on the same {ep.EVAL_SPLIT} split")
    scored = _predict(loaded, meta, dataset_dir, batch_size)
    expected = meta.splits[ep.EVAL_SPLIT].num_examples
    if len(scored.labels) != expected:
        return _not_compared(found, f"it scored {len(scored.labels)} of the split's {expected} "
                                    "examples", log), root
    loss = float(scored.losses().mean())
    slices = sl.slice_eval_split(meta, dataset_dir, slice_columns, scored)
    if scored.is_regression:
        errors = regression_metrics(scored)
        log(f"served version {found.version}: RMSE={errors.rmse:.4f} MAE={errors.mae:.4f}")
        return ServedModel(path=found.path, version=found.version, loss=loss, slices=slices,
                           rmse=errors.rmse, mae=errors.mae), root
    accuracy = float(np.mean(scored.predicted == scored.labels))
    log(f"served version {found.version}: accuracy={accuracy:.4f} loss={loss:.4f}")
    return ServedModel(path=found.path, version=found.version, accuracy=accuracy, loss=loss,
                       slices=slices), root


def _not_compared(found: serving_versions.ServedVersion, why: str,
                  log: Callable[[str], None], class_change: bool = False) -> ServedModel:
    log(f"WARNING: the served model {found.path} cannot be compared with the new one: {why}")
    return ServedModel(path=found.path, version=found.version, mismatch=why,
                       class_change=class_change)
