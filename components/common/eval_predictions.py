"""A SavedModel's predictions on a dataset's eval split, and where they are kept.

`evaluate_model` scores the Model artifact's Keras SavedModel on the eval
split. The training leader has TensorFlow loaded and the eval split at hand
when it saves that SavedModel, so it scores it right there, with the same
`predict` the evaluation uses, and keeps the outcome in the artifact
(`model_artifact.EVAL_PREDICTIONS_FILE`): per example the label, the
predicted class and the probability given to the label. That is all the
evaluation's metrics need, and reading it back needs no TensorFlow.

The file is keyed by two fingerprints: the SHA-256 of the eval split's shard
files, in shard order, and the SHA-256 of every file of the SavedModel
(graph, `variables/`, assets, `fingerprint.pb`; by relative path and
content). `fingerprint.pb` alone is not enough: it is written at save time,
so a SavedModel whose `variables/` were replaced afterwards keeps the old
one. The evaluation uses the file only when both keys match the dataset and
model it was given, and predicts afresh otherwise (another dataset, a
rewritten shard, a replaced model or variables, an artifact from an older
trainer).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import List, Optional

import numpy as np

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.common import dataset_spec as ds
from kfdist.components.common import model_artifact as ma
from kfdist.components.common.errors import require

EVAL_SPLIT = "eval"
#: Examples per batch when the eval split is scored (here, in validation, by the evaluator).
EVAL_BATCH = 256
_READ_CHUNK = 1 << 22


@dataclasses.dataclass(frozen=True)
class EvalPredictions:
    """What a model predicted for each example of an eval split, in shard order.

    Attributes:
      labels: The true class ids, int64 `[N]`; for a regression the numbers, float32.
      predicted: The argmax class ids, int64 `[N]` (what serving returns); for a
        regression the predicted numbers, float32.
      label_probability: The probability the model gave the true class, float32 `[N]`;
        empty for a regression.
    """

    labels: np.ndarray
    predicted: np.ndarray
    label_probability: np.ndarray

    @property
    def is_regression(self) -> bool:
        """Whether these are a regression's numbers (float labels) rather than classes."""
        return self.labels.dtype.kind == "f"

    def losses(self) -> np.ndarray:
        """Each example's cross-entropy, float64 `[N]` (probabilities clipped to [1e-7, 1]);
        for a regression its squared error."""
        if self.is_regression:
            return (self.predicted.astype(np.float64) - self.labels.astype(np.float64)) ** 2
        return -np.log(np.clip(self.label_probability.astype(np.float64), 1e-7, 1.0))

    @classmethod
    def from_values(cls, labels: np.ndarray, values: np.ndarray) -> "EvalPredictions":
        """A regression's: the labels `[N]` and the predicted numbers `[N]` or `[N, 1]`."""
        return cls(labels=labels.astype(np.float32).reshape(-1),
                   predicted=values.astype(np.float32).reshape(-1),
                   label_probability=np.zeros(0, np.float32))

    @classmethod
    def from_probabilities(cls, labels: np.ndarray, probabilities: np.ndarray) -> "EvalPredictions":
        """From the labels `[N]` and the predicted class probabilities `[N, C]`."""
        labels = labels.astype(np.int64)
        return cls(labels=labels, predicted=probabilities.argmax(axis=1).astype(np.int64),
                   label_probability=probabilities[np.arange(len(labels)), labels]
                   .astype(np.float32))


def _files_sha256(paths: List[str], root: Optional[str] = None) -> str:
    """SHA-256 over each file's name (relative to `root`, else its base name) and content."""
    digest = hashlib.sha256()
    for path in paths:
        name = os.path.relpath(path, root) if root else os.path.basename(path)
        digest.update(name.replace(os.sep, "/").encode() + b"\0")
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(_READ_CHUNK), b""):
                digest.update(chunk)
    return digest.hexdigest()


def _saved_model_files(saved_model: str) -> List[str]:
    """Every file under the SavedModel directory, in a fixed (sorted) order."""
    return sorted(os.path.join(folder, name) for folder, _, names in os.walk(saved_model)
                  for name in names)


def _fingerprints(model_dir: str, dataset_dir: str,
                  meta: ds.DatasetMetadata) -> Optional[dict]:
    """The two keys of the predictions, or None when the artifact has no SavedModel."""
    saved_model = os.path.join(model_dir, ma.SAVED_MODEL_DIR)
    files = _saved_model_files(saved_model)
    if not files:
        return None
    return {"eval_shards_sha256": _files_sha256(meta.shard_paths(dataset_dir, EVAL_SPLIT)),
            "saved_model_sha256": _files_sha256(files, root=saved_model)}


def predict(model, model_meta: ds.DatasetMetadata, data_meta: ds.DatasetMetadata,
            dataset_dir: str, batch_size: int = EVAL_BATCH) -> EvalPredictions:
    """Scores a Keras model on the eval split (needs TensorFlow).

    Args:
      model: The Keras model of the artifact's SavedModel (preprocessed float32 input).
      model_meta: The metadata the model was trained with (its preprocessing is applied).
      data_meta: The scored dataset's metadata (its shards are parsed).
      dataset_dir: The scored dataset's local directory.
      batch_size: Examples per prediction batch.

    Raises:
      InvalidInputError: When the split holds another number of records than its
        metadata says, the model's classes differ, or a label is out of range.
    """
    import tensorflow as tf

    from kfdist.components.common import tf_features
    from kfdist.components.common.serving_model import outputs_are_logits

    data = tf_features.split_batches(data_meta, dataset_dir, EVAL_SPLIT, batch_size,
                                     preprocessing=model_meta).prefetch(tf.data.AUTOTUNE)
    if model_meta.is_regression:
        labels, values = zip(*((y.numpy(), model(x, training=False).numpy()) for x, y in data))
        scored = EvalPredictions.from_values(np.concatenate(labels), np.concatenate(values))
        _check_count(len(scored.labels), data_meta, dataset_dir)
        return scored
    logits = outputs_are_logits(model)
    labels, probs = [], []
    for x, y in data:
        out = model(x, training=False)
        probs.append((tf.nn.softmax(out) if logits else out).numpy().astype(np.float32))
        labels.append(y.numpy())
    labels_arr = np.concatenate(labels).astype(np.int64)
    probs_arr = np.concatenate(probs)
    _check_count(len(labels_arr), data_meta, dataset_dir)
    require(probs_arr.shape[1] == model_meta.num_classes,
            f"model outputs {probs_arr.shape[1]} classes but its dataset has {model_meta.num_classes}")
    bad = labels_arr[(labels_arr < 0) | (labels_arr >= model_meta.num_classes)]
    require(bad.size == 0, f"eval labels {sorted(set(bad.tolist()))[:5]} are outside "
            f"0..{model_meta.num_classes - 1}")
    return EvalPredictions.from_probabilities(labels_arr, probs_arr)


def _check_count(count: int, data_meta: ds.DatasetMetadata, dataset_dir: str) -> None:
    """Raises `InvalidInputError` unless `count` predictions cover the split's examples."""
    expected = data_meta.splits[EVAL_SPLIT].num_examples
    require(count == expected,
            f"eval split of {dataset_dir!r} holds {count} records but its metadata "
            f"says {expected}; the dataset is incomplete or corrupted")


def score(scored: EvalPredictions) -> float:
    """The headline figure of predictions: accuracy, or a regression's RMSE."""
    if scored.is_regression:
        return float(np.sqrt(scored.losses().mean()))
    return float(np.mean(scored.predicted == scored.labels))


def record(model_dir: str, dataset_dir: str, meta: ds.DatasetMetadata) -> Optional[float]:
    """Scores the artifact's SavedModel on the eval split and keeps the predictions in it.

    Call it once the SavedModel is saved, with the dataset it was trained on.

    Args:
      model_dir: The local Model artifact directory.
      dataset_dir: The local dataset directory.
      meta: Its metadata.

    Returns:
      The accuracy (a regression's RMSE: `score`), or None when there is nothing to keep (no
      eval examples, no SavedModel).
    """
    if meta.splits.get(EVAL_SPLIT) is None or meta.splits[EVAL_SPLIT].num_examples <= 0:
        return None
    keys = _fingerprints(model_dir, dataset_dir, meta)
    if keys is None:
        return None
    from kfdist.components.common.serving_model import load_trained_model

    model = load_trained_model(os.path.join(model_dir, ma.SAVED_MODEL_DIR))
    scored = predict(model, meta, meta, dataset_dir)
    path = os.path.join(model_dir, ma.EVAL_PREDICTIONS_FILE)
    tmp = f"{path}.tmp-{os.getpid()}.npz"
    np.savez(tmp, keys=np.array(json.dumps(keys, sort_keys=True)), **dataclasses.asdict(scored))
    os.replace(tmp, path)
    return score(scored)


def load_matching(model_dir: str, dataset_dir: str,
                  meta: ds.DatasetMetadata) -> Optional[EvalPredictions]:
    """The kept predictions, when they were made by this SavedModel on these eval shards.

    Args:
      model_dir: The local Model artifact directory.
      dataset_dir: The local dataset directory whose eval split is to be scored.
      meta: That dataset's metadata.

    Returns:
      The predictions, or None when the artifact holds none or they do not match.
    """
    path = os.path.join(model_dir, ma.EVAL_PREDICTIONS_FILE)
    if not os.path.isfile(path):
        return None
    keys = _fingerprints(model_dir, dataset_dir, meta)
    with np.load(path, allow_pickle=False) as kept:
        if keys is None or json.loads(str(kept["keys"])) != keys:
            return None
        scored = EvalPredictions(**{f.name: kept[f.name] for f in dataclasses.fields(EvalPredictions)})
    if len(scored.labels) != meta.splits[EVAL_SPLIT].num_examples:
        return None
    return scored
