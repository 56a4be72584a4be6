"""The on-disk contract of a trained kfdist model (the `Model` artifact).

Layout of a model directory::

    saved_model/            # Keras SavedModel; input = *preprocessed* float32 tensor
    serving_model/          # SavedModel for TF Serving: raw inputs in, class_ids and
                            # probabilities out (`serving_model`); what the export publishes
    dataset_metadata.json   # the training dataset's metadata (feature, preprocessing, classes)
    dataset_statistics.json # a table's: the training dataset's statistics (`dataset_statistics`)
    history.json            # per epoch: {"epochs": [{"epoch": 1, "loss": ..., "seconds": ...}]}
                            # (and the eval split's "val_loss", "val_accuracy",
                            # "validation_seconds"; with early stopping the validation
                            # part's "selection_loss", "selection_accuracy")
    training_report.json    # TrainingReport: strategy, replicas, final metrics, throughput
    eval_predictions.npz    # the leader's scoring of saved_model on the eval split, keyed by
                            # fingerprints of both (`eval_predictions`)
    checkpoints/            # the chief's latest weights checkpoint (overwritten each epoch),
                            # ckpt.epoch.json: the epoch it holds (and, while a side-car
                            # evaluator runs, pending/epoch-<n>/: each epoch's copy it has
                            # not evaluated yet)
    backup/                 # only while training runs or after it was interrupted: the
                            # state (weights, optimizer, epoch) a restarted job resumes from,
                            # and the best epoch's weights so far (early stopping)
    tensorboard/            # TensorBoard event files, written as training goes: train/,
                            # validation/ (the leader's) and evaluator/ (`tensorboard_events`)

The chief replica writes all of it; other replicas write only to temporary
paths that are removed afterwards.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional

from kfdist.components.common.kept_epoch import KeptEpoch

SAVED_MODEL_DIR = "saved_model"
SERVING_MODEL_DIR = "serving_model"
DATASET_METADATA_FILE = "dataset_metadata.json"
DATASET_STATISTICS_FILE = "dataset_statistics.json"
HISTORY_FILE = "history.json"
TRAINING_REPORT_FILE = "training_report.json"
EVAL_PREDICTIONS_FILE = "eval_predictions.npz"
#: Per-epoch wall time of the training steps in `history.json`, beside the metrics.
EPOCH_SECONDS = "seconds"
#: Per-epoch wall time of the leader's validation on the eval split in `history.json`.
VALIDATION_SECONDS = "validation_seconds"
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_PREFIX = "ckpt"
#: Beside the checkpoint: `{"epoch": n, "index_sha256": ...}`, the epoch whose weights the
#: checkpoint with that index holds (written by the chief after each save).
CHECKPOINT_EPOCH_FILE = "ckpt.epoch.json"
#: With a side-car evaluator: `checkpoints/pending/epoch-<n>/ckpt`, a copy of each epoch's
#: checkpoint kept until the evaluator evaluated it, so that none is skipped.
PENDING_CHECKPOINTS_DIR = "pending"
BACKUP_DIR = "backup"
#: TensorBoard event files, written as training goes (`replica.tensorboard_events`).
TENSORBOARD_DIR = "tensorboard"
#: What training leaves before it finishes: a run holding only these can be resumed.
TRAINING_STATE_ENTRIES = (BACKUP_DIR, CHECKPOINTS_DIR, HISTORY_FILE, TENSORBOARD_DIR)


@dataclasses.dataclass(frozen=True)
class ReplicaReport:
    """What one training replica reports when it ends.

    Attributes:
      task: `worker:0`, `chief:0`, ...
      pid: Operating-system process id.
      num_replicas_in_sync: Replicas the strategy synchronised.
      weights_sha256: SHA-256 over the final weights (float32 bytes, model order).
      variable_devices: Device of each model variable as the replica placed
        it (e.g. `/job:ps/replica:0/task:1/device:CPU:0` under `parameter_server`).
    """

    task: str
    pid: int
    num_replicas_in_sync: int
    weights_sha256: str
    variable_devices: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class TrainingReport:
    """Summary of a finished training job (written by the chief).

    Attributes:
      backend: `local`, `tfjob` or `mpijob`.
      strategy: Distribution strategy name.
      workers: Number of worker processes.
      model_name: Model trained (`mnist_mlp`, `mnist_cnn` or `module:function`).
      epochs: Epochs completed.
      final_loss: Training loss of the last epoch.
      final_accuracy: Training accuracy of the last epoch (None for a regression).
      final_val_loss: Loss on the eval split after the last epoch (None when
        not recorded: no eval split, or a model trained before validation).
      final_val_accuracy: Accuracy on the eval split after the last epoch (None
        when not recorded).
      examples_per_second: Training throughput over all workers.
      wall_seconds: Wall time of `fit`.
      replicas: One report per training replica process.
      input_bound_fraction: Share of the leader's step time spent waiting for
        the next input batch (None where it cannot be measured: `parameter_server`
        steps run asynchronously on the workers).
      initial_epoch: Epochs restored from a backup before training went on
        (0 when the run started from scratch).
      restarts: Replica restarts the backend made (failed replicas restarted
        per the restart policy).
      evaluations: The side-car evaluator's results, one per checkpoint it
        evaluated: `{"epoch": n, "loss": ..., "accuracy": ...}` (empty without
        an evaluator).
      lowered_batch_size: The batch per replica training used in place of the one asked
        for, when the train split held fewer examples than one global batch of it (None:
        the batch asked for).
      kept_epoch: The epoch whose weights the model holds (None: a report
        written before it was recorded); the final figures above are its.
      epochs_planned: The epochs asked for (`epochs` can be fewer: early stopping).
      early_stopping_patience: The early-stopping patience; None: it was off.
      early_stopping_min_delta: The least fall of the validation loss that counted as one.
      kept_validation_loss: The kept epoch's loss on the validation part.
      final_rmse: A regression's training RMSE of the kept epoch (None: a classifier).
      final_val_rmse: A regression's RMSE on the eval split after the kept epoch.
    """

    backend: str
    strategy: str
    workers: int
    model_name: str
    epochs: int
    final_loss: float
    final_accuracy: Optional[float]
    examples_per_second: float
    wall_seconds: float
    replicas: List[ReplicaReport]
    input_bound_fraction: Optional[float] = None
    initial_epoch: int = 0
    restarts: int = 0
    final_val_loss: Optional[float] = None
    final_val_accuracy: Optional[float] = None
    evaluations: List[Dict[str, float]] = dataclasses.field(default_factory=list)
    lowered_batch_size: Optional[int] = None
    kept_epoch: Optional[int] = None
    epochs_planned: Optional[int] = None
    early_stopping_patience: Optional[int] = None
    early_stopping_min_delta: float = 0.0
    kept_validation_loss: Optional[float] = None
    final_rmse: Optional[float] = None
    final_val_rmse: Optional[float] = None

    def kept(self) -> Optional[KeptEpoch]:
        """Which epoch the model holds and why (None when the report does not say)."""
        if self.kept_epoch is None:
            return None
        planned = self.epochs_planned or self.epochs
        return KeptEpoch(self.kept_epoch, self.epochs, planned, self.early_stopping_patience,
                         self.epochs < planned, self.kept_validation_loss,
                         self.early_stopping_min_delta)

    def metric_values(self) -> Dict[str, float]:
        """The training step's `metrics`: the kept epoch's figures (accuracy, or a
        regression's RMSE), throughput, time, replicas and restarts, and which epoch was kept
        (`KeptEpoch.metric_values`); a figure not had is left out."""
        kept = self.kept()
        figures = {"final_loss": self.final_loss, "final_accuracy": self.final_accuracy,
                   "final_val_loss": self.final_val_loss, "final_rmse": self.final_rmse,
                   "final_val_accuracy": self.final_val_accuracy,
                   "final_val_rmse": self.final_val_rmse,
                   "examples_per_second": self.examples_per_second,
                   "training_seconds": self.wall_seconds, "workers": self.workers,
                   "input_bound_fraction": self.input_bound_fraction, "restarts": self.restarts,
                   "lowered_batch_size": self.lowered_batch_size,
                   "resumed_from_epoch": self.initial_epoch,
                   **(kept.metric_values() if kept is not None else {})}
        return {name: value for name, value in figures.items() if value is not None}

    def to_json(self) -> str:
        """Serialises to JSON."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "TrainingReport":
        """Parses JSON written by `to_json`."""
        d = json.loads(text)
        d["replicas"] = [ReplicaReport(**r) for r in d["replicas"]]
        return cls(**d)


def read_history(model_dir: str) -> Dict[str, List[float]]:
    """Returns per-epoch metric lists, e.g. `{"loss": [...], "accuracy": [...]}`."""
    path = os.path.join(model_dir, HISTORY_FILE)
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        epochs = json.load(f)["epochs"]
    keys = sorted({k for e in epochs for k in e if k != "epoch"})
    return {k: [e.get(k) for e in epochs] for k in keys}


def read_training_report(model_dir: str) -> Optional[TrainingReport]:
    """Returns the model's training report, or None if it has none."""
    path = os.path.join(model_dir, TRAINING_REPORT_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return TrainingReport.from_json(f.read())
