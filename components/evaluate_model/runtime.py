"""Runtime of `evaluate_model`: score a trained model on a dataset's `eval` split.

The model artifact's SavedModel takes the *preprocessed* float32 input, so the
eval shards are parsed and preprocessed with the preprocessing recorded in the
model's own `dataset_metadata.json` (the one it was trained with). Predicted
classes are the argmax of the model's output, exactly what the exported
serving signature returns, so the confusion matrix counts what serving would
predict. The model served under the same export base and name (the latest
exported version) is scored on the same split and slices (`served`), and the
blessing follows `verdict.decide`: the threshold, and not worse than the
served model by more than `min_improvement`.

The trainer scores its SavedModel on the eval split as it saves it and keeps
the predictions in the artifact (`eval_predictions`); they are used, without
loading TensorFlow, when their fingerprints match this model and these shards.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.components.common import dataset_spec as ds
from kfdist.components.common import eval_predictions as ep
from kfdist.components.common import model_artifact as ma
from kfdist.components.common import storage
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.components.evaluate_model import slices as sl
from kfdist.components.evaluate_model import verdict as vd
from kfdist.components.evaluate_model.regression_eval import (
    RegressionEvaluation, regression_result)

EVAL_SPLIT = ep.EVAL_SPLIT


@dataclasses.dataclass(frozen=True)
class ClassMetrics:
    """Metrics of one class on the eval split (None where undefined: nothing to divide by)."""

    name: str
    support: int
    precision: Optional[float]
    recall: Optional[float]


@dataclasses.dataclass(frozen=True)
class EvaluationResult:
    """Outcome of evaluating a model on a dataset's eval split.

    Attributes:
      accuracy: Fraction of examples whose argmax prediction equals the label.
      loss: Mean sparse categorical cross-entropy.
      num_examples: Eval examples scored.
      confusion_matrix: Counts indexed `[true][predicted]`.
      class_names: Display names, index = class id.
      blessed: Whether the model clears the threshold and is not worse than the
        served model by more than `min_improvement` (`verdict.decide`).
      reason: Human-readable verdict, e.g. `accuracy 0.953 ≥ threshold 0.900 and
        the served version 1700000000 scores 0.941 ...`.
      threshold: The accuracy threshold applied.
      per_class: Per-class support, precision and recall.
      excluded_columns: The source columns left out of the dataset, each
        with why (`dataset_spec.ExcludedColumn.describe`).
      slices: The metrics of each slice of the `slice_columns` (`slices`).
      served: The served model, compared or not; None when none is served.
      served_root: Where a served model was looked for, `<export_base>/<name>`
        (empty: no export base given).
      min_improvement: How much more accuracy than the served model's was needed.
      allow_class_change: Whether a model with other classes than the served one's
        could replace it.
      data_source: Where the evaluated dataset's examples came from (its `source_uri`).
      task: `classification` (a regression's is a `regression_eval.RegressionEvaluation`).
    """

    accuracy: float
    loss: float
    num_examples: int
    confusion_matrix: List[List[int]]
    class_names: List[str]
    blessed: bool
    reason: str
    threshold: float
    per_class: List[ClassMetrics] = dataclasses.field(default_factory=list)
    excluded_columns: List[str] = dataclasses.field(default_factory=list)
    slices: List[sl.SliceMetrics] = dataclasses.field(default_factory=list)
    served: Optional[vd.ServedModel] = None
    served_root: str = ""
    min_improvement: float = vd.MIN_IMPROVEMENT
    allow_class_change: bool = vd.ALLOW_CLASS_CHANGE
    data_source: Optional[str] = None
    task: str = ds.CLASSIFICATION

    @property
    def accuracy_change(self) -> Optional[float]:
        """Accuracy minus the served model's, when it was compared."""
        return self.accuracy - self.served.accuracy if self.served and self.served.compared else None

    def to_json(self) -> str:
        """Serialises to JSON (for a Metrics/JSON artifact)."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)


def _stage(uri: str, workdir: str, what: str) -> str:
    require(bool(uri), f"{what} is empty; expected a directory or gs://, s3:// or minio:// prefix")
    if storage.is_remote(uri):
        return storage.stage_locally(uri, os.path.join(workdir, what))
    if not os.path.isdir(uri):
        raise InvalidInputError(f"{what} {uri!r} does not exist or is not a directory")
    return uri


def _load_metadata(model_dir: str, dataset_dir: str) -> Tuple[ds.DatasetMetadata, ds.DatasetMetadata]:
    """The model's training metadata and the dataset's, checked against each other."""
    saved = os.path.join(model_dir, ma.SAVED_MODEL_DIR)
    meta_path = os.path.join(model_dir, ma.DATASET_METADATA_FILE)
    require(os.path.isdir(saved), f"model_dir {model_dir!r} has no {ma.SAVED_MODEL_DIR}/ "
            "(expected a model artifact written by train_distributed)")
    require(os.path.isfile(meta_path), f"model_dir {model_dir!r} has no {ma.DATASET_METADATA_FILE}")
    with open(meta_path) as f:
        model_meta = ds.DatasetMetadata.from_json(f.read())
    data_meta = ds.load_metadata(dataset_dir)
    require(model_meta.feature == data_meta.feature,
            f"dataset {dataset_dir!r} has input feature {data_meta.feature} but the model was "
            f"trained on {model_meta.feature}; evaluate on a dataset with the same feature spec")
    require(model_meta.task == data_meta.task,
            f"dataset {dataset_dir!r} is a {data_meta.task}'s but the model was trained for "
            f"{model_meta.task}; evaluate on a dataset of the same task")
    require(model_meta.num_classes == data_meta.num_classes,
            f"dataset {dataset_dir!r} has {data_meta.num_classes} classes but the model was "
            f"trained on {model_meta.num_classes}")
    require(EVAL_SPLIT in data_meta.splits and data_meta.splits[EVAL_SPLIT].num_examples > 0,
            f"dataset {dataset_dir!r} has no examples in its {EVAL_SPLIT!r} split")
    return model_meta, data_meta


def _predictions(model_dir: str, dataset_dir: str, batch_size: int,
                 log: Callable[[str], None], slice_columns: Sequence[str] = ()
                 ) -> Tuple[ep.EvalPredictions, ds.DatasetMetadata, ds.DatasetMetadata]:
    """The SavedModel's predictions on the eval split: the ones the trainer kept when they
    match this model and these shards (no TensorFlow needed), else predicted here. The
    `slice_columns` are checked against the dataset first."""
    model_meta, data_meta = _load_metadata(model_dir, dataset_dir)
    sl.check_slice_columns(slice_columns, data_meta.feature, data_meta.excluded_columns or ())
    log(f"evaluating {model_dir} on the {EVAL_SPLIT} split of {dataset_dir} "
        f"({data_meta.splits[EVAL_SPLIT].num_examples} examples)")
    kept = ep.load_matching(model_dir, dataset_dir, data_meta)
    if kept is not None:
        log(f"using the predictions the trainer kept in {ma.EVAL_PREDICTIONS_FILE}: made by this "
            "SavedModel on these eval shards (both fingerprints match)")
        return kept, model_meta, data_meta
    from kfdist.components.common.serving_model import load_trained_model

    model = load_trained_model(os.path.join(model_dir, ma.SAVED_MODEL_DIR))
    return ep.predict(model, model_meta, data_meta, dataset_dir, batch_size), model_meta, data_meta


def predict_classes(model_dir: str, dataset_dir: str, *,
                    batch_size: int = ep.EVAL_BATCH) -> np.ndarray:
    """Returns the predicted class ids (int64 `[N]`) over the eval split, in shard order."""
    with tempfile.TemporaryDirectory(prefix="kfdist-eval-") as work:
        model_dir = _stage(model_dir, work, "model_dir")
        dataset_dir = _stage(dataset_dir, work, "dataset_dir")
        return _predictions(model_dir, dataset_dir, batch_size, lambda line: None)[0].predicted


def validate_evaluation_args(*, accuracy_threshold: float = 0.9, slice_columns: Sequence[str] = (),
                             batch_size: int = ep.EVAL_BATCH,
                             min_improvement: float = vd.MIN_IMPROVEMENT,
                             rmse_threshold: float = vd.RMSE_THRESHOLD) -> None:
    """Checks evaluation parameters before any work is done.

    Raises:
      InvalidInputError: Naming the invalid value and what would be valid.
    """
    require(isinstance(accuracy_threshold, (int, float)) and not isinstance(accuracy_threshold, bool)
            and 0.0 <= float(accuracy_threshold) <= 1.0,
            f"accuracy_threshold={accuracy_threshold!r} is invalid; expected a number in [0, 1]")
    require(isinstance(batch_size, int) and not isinstance(batch_size, bool) and batch_size > 0,
            f"batch_size={batch_size!r} is invalid; expected a positive integer")
    vd.check_min_improvement(min_improvement)
    vd.check_rmse_threshold(rmse_threshold)
    sl.check_slice_columns_form(slice_columns)


def evaluate(model_dir: str, dataset_dir: str, *, accuracy_threshold: float = 0.9,
             slice_columns: Sequence[str] = (), batch_size: int = ep.EVAL_BATCH,
             export_base: str = "", serving_model_name: str = "",
             min_improvement: float = vd.MIN_IMPROVEMENT,
             allow_class_change: bool = vd.ALLOW_CLASS_CHANGE,
             rmse_threshold: float = vd.RMSE_THRESHOLD,
             log: Callable[[str], None] = print) -> "EvaluationResult | RegressionEvaluation":
    """Evaluates a model artifact on a dataset's eval split and decides its blessing.

    Args:
      model_dir: Model artifact directory (local or remote), see `model_artifact`.
      dataset_dir: kfdist dataset directory (local or remote) whose `eval` split is scored;
        its input feature spec must equal the one the model was trained on.
      accuracy_threshold: Minimum accuracy, in [0, 1], for the model to be blessed.
      slice_columns: Columns of a table whose values slice the eval split
        (`slices`): each slice's metrics are reported.
      batch_size: Examples per prediction batch.
      export_base: The export step's base (local or remote): the latest version of
        `serving_model_name` under it is the served model the new one is compared
        with. Empty: no comparison (the threshold alone).
      serving_model_name: The model's name in the serving layout.
      min_improvement: In [-1, 1]: how much more held-out accuracy than the served
        model's the new one needs (0: not worse; negative: a tolerance).
      allow_class_change: Let a model that predicts other classes than the served one
        replace it (on the threshold alone); by default it is not blessed.
      rmse_threshold: A regression's highest held-out RMSE blessed, in the label's units;
        0: the RMSE of predicting the train split's mean label (`regression_eval`).
      log: Receives progress lines.

    Returns:
      The metrics, confusion matrix and blessing verdict; for a regression's model its
      RMSE, MAE, R² and verdict (`regression_eval.RegressionEvaluation`).

    Raises:
      InvalidInputError: On a bad threshold, batch size or slice column, a missing or
        incomplete directory, or a dataset that does not match the model.
    """
    validate_evaluation_args(accuracy_threshold=accuracy_threshold, slice_columns=slice_columns,
                             batch_size=batch_size, min_improvement=min_improvement,
                             rmse_threshold=rmse_threshold)
    if export_base:
        from kfdist.components.export_saved_model.runtime import validate_export_args

        validate_export_args(serving_model_name=serving_model_name, export_base=export_base)
    threshold = float(accuracy_threshold)
    with tempfile.TemporaryDirectory(prefix="kfdist-eval-") as work:
        model_dir = _stage(model_dir, work, "model_dir")
        dataset_dir = _stage(dataset_dir, work, "dataset_dir")
        scored, model_meta, data_meta = _predictions(model_dir, dataset_dir, batch_size, log,
                                                     slice_columns)
        slices = sl.slice_eval_split(data_meta, dataset_dir, slice_columns, scored)
        from kfdist.components.evaluate_model.served import score_served

        served, served_root = score_served(export_base, serving_model_name, data_meta,
                                           dataset_dir, slice_columns, work,
                                           batch_size=batch_size, log=log)
    for column in slice_columns:
        log(f"slices by {column}: " + ", ".join(
            f"{s.value} {s.rmse if scored.is_regression else s.accuracy:.4f} ({s.examples})"
            for s in slices if s.column == column))
    if scored.is_regression:
        return regression_result(scored, model_meta, data_meta, float(rmse_threshold), log,
                                 served=served, served_root=served_root,
                                 min_improvement=float(min_improvement),
                                 allow_class_change=bool(allow_class_change), slices=slices)
    result = _result(scored, model_meta, data_meta, threshold, log, served=served,
                     served_root=served_root, min_improvement=float(min_improvement),
                     allow_class_change=bool(allow_class_change))
    return dataclasses.replace(result, slices=slices)


def _result(scored: ep.EvalPredictions, model_meta: ds.DatasetMetadata,
            data_meta: ds.DatasetMetadata, threshold: float,
            log: Callable[[str], None], *, served: Optional[vd.ServedModel] = None,
            served_root: str = "", min_improvement: float = vd.MIN_IMPROVEMENT,
            allow_class_change: bool) -> EvaluationResult:
    """The metrics and the verdict from the eval split's predictions."""
    num_classes = model_meta.num_classes
    labels = scored.labels
    cm = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(cm, (labels, scored.predicted), 1)
    n = int(len(labels))
    accuracy = float(np.trace(cm)) / n
    loss = float(scored.losses().mean())
    names = list(model_meta.class_names or data_meta.class_names
                 or ds.display_class_names(model_meta))
    per_class = []
    for i, name in enumerate(names):
        support, predicted = int(cm[i].sum()), int(cm[:, i].sum())
        per_class.append(ClassMetrics(
            name=name, support=support,
            precision=float(cm[i, i]) / predicted if predicted else None,
            recall=float(cm[i, i]) / support if support else None))
    blessed, reason = vd.decide(accuracy, threshold, served=served, served_root=served_root,
                                min_improvement=min_improvement,
                                allow_class_change=allow_class_change)
    log(f"accuracy={accuracy:.4f} loss={loss:.4f} over {n} examples; "
        f"{'blessed' if blessed else 'not blessed'}: {reason}")
    return EvaluationResult(
        accuracy=accuracy, loss=loss, num_examples=n, confusion_matrix=cm.tolist(),
        class_names=names, blessed=blessed, reason=reason, threshold=threshold,
        per_class=per_class,
        excluded_columns=[c.describe() for c in data_meta.excluded_columns or ()],
        served=served, served_root=served_root, min_improvement=min_improvement,
        allow_class_change=allow_class_change, data_source=data_meta.source_uri)


# The report renderers are part of this runtime's interface (component.py calls them here).
from kfdist.components.evaluate_model.report import (  # noqa: E402,F401
    render_report_html, render_report_markdown)
