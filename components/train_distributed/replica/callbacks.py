"""The Keras callbacks of a training replica: backups, history, epoch lines, Horovod's."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from typing import Callable, Dict, List, Optional

import tensorflow as tf

from kfdist.components.common import model_artifact
from kfdist.components.train_distributed.job import config
from kfdist.components.train_distributed.job.epoch_line import format_epoch_line
from kfdist.components.train_distributed.replica import (early_stopping, tensorboard_events,
                                                         trainer_status)
from kfdist.components.train_distributed.replica.outputs import log, write_json
from kfdist.components.train_distributed.replica.strategies import Role


class EpochLogger(tf.keras.callbacks.Callback):
    """Logs one line per epoch (loss, accuracy, validation, global examples per second) and a resume.

    Its time and examples per second are the epoch's training steps' (`history`'s
    `steps_seconds`), without the validation and the checkpoints' writing.
    """

    def __init__(self, epochs: int, examples_per_epoch: int, enabled: bool,
                 history: Optional["HistoryWriter"] = None):
        super().__init__()
        self._epochs = epochs
        self._examples_per_epoch = examples_per_epoch
        self._enabled = enabled
        self._history = history
        self._start = 0.0
        self._first = True

    def on_epoch_begin(self, epoch, logs=None):
        if self._first and epoch > 0 and self._enabled:
            log(f"resuming from the backup: epochs 1-{epoch} are done, starting epoch {epoch + 1}")
        self._first = False
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if not self._enabled:
            return
        seconds = max(self._history.steps_seconds if self._history is not None
                      else time.perf_counter() - self._start, 1e-9)
        log(format_epoch_line(epoch + 1, self._epochs, logs or {},
                              self._examples_per_epoch / seconds, seconds))


class HistoryWriter(tf.keras.callbacks.Callback):
    """Keeps `history.json` current after every epoch, across restarts of the job.

    A resumed run starts a new `fit`, whose History holds only the epochs it
    ran; the epochs done before the interruption come from the file.

    With a `validation` (the leader's), each epoch's entry also holds
    `val_loss`, `val_accuracy` and `validation_seconds`; the validation
    metrics are added to the epoch's `logs` too, for the callbacks after this
    one. The entry's `seconds` is the training steps' time, taken before
    validating.
    """

    def __init__(self, path: str, enabled: bool,
                 validation: Optional[Callable[[tf.keras.Model], Dict[str, float]]] = None):
        super().__init__()
        self._path = path
        self._enabled = enabled
        self._validation = validation
        self._started = 0.0
        self.validation_seconds = 0.0
        self.epochs: List[dict] = []

    def on_epoch_begin(self, epoch, logs=None):
        if not self.epochs and self._enabled and os.path.isfile(self._path):
            with open(self._path) as f:
                self.epochs = [e for e in json.load(f)["epochs"] if e["epoch"] <= epoch]
        self._started = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        entry = {"epoch": epoch + 1, **{k: float(v) for k, v in (logs or {}).items()},
                 model_artifact.EPOCH_SECONDS: time.perf_counter() - self._started}
        if self._validation is not None:
            started = time.perf_counter()
            scores = self._validation(self.model)
            self.validation_seconds = time.perf_counter() - started
            entry.update(scores, **{model_artifact.VALIDATION_SECONDS: self.validation_seconds})
            if logs is not None:
                logs.update(scores)
        self.epochs = [e for e in self.epochs if e["epoch"] != epoch + 1]
        self.epochs.append(entry)
        if self._enabled:
            write_json(self._path, {"epochs": self.epochs})

    @property
    def steps_seconds(self) -> float:
        """The last epoch's training steps' seconds (its entry's, validation left out): what the
        epoch line, the TensorBoard scalars and Trainer's status take their examples/s from."""
        return self.epochs[-1][model_artifact.EPOCH_SECONDS]


def resume_epoch(role: Role, backup_dir: str) -> int:
    """Under Horovod: the epoch rank 0's backup resumes from, agreed by every rank."""
    epoch = 0
    if role.leader:
        path = os.path.join(backup_dir, EPOCHS_DONE_FILE)
        if os.path.isfile(path):
            with open(path) as f:
                epoch = int(json.load(f)["epochs_done"])
    import horovod.tensorflow as hvd_tf  # bound to tf-keras already (horovod_support)

    return int(hvd_tf.broadcast_object(epoch, root_rank=0, name="kfdist_resume_epoch"))


EPOCHS_DONE_FILE = "kfdist-epochs-done.json"


class _EpochsDone(tf.keras.callbacks.Callback):
    """Records next to Horovod rank 0's backup how many epochs it holds."""

    def __init__(self, backup_dir: str):
        super().__init__()
        self._path = os.path.join(backup_dir, EPOCHS_DONE_FILE)

    def on_epoch_end(self, epoch, logs=None):
        if os.path.isdir(os.path.dirname(self._path)):
            write_json(self._path, {"epochs_done": epoch + 1})


class CheckpointEpoch(tf.keras.callbacks.Callback):
    """Records which epoch the checkpoint holds, keyed by the digest of its index.

    Runs after `ModelCheckpoint` saved the epoch's weights: the side-car
    evaluator takes a checkpoint's epoch from this file only when the digest
    matches the index it loaded, so it never pairs weights with another epoch.
    """

    def __init__(self, checkpoints_dir: str, keep_for_evaluator: bool):
        super().__init__()
        self._dir = checkpoints_dir
        self._keep = keep_for_evaluator

    def on_epoch_end(self, epoch, logs=None):
        index = os.path.join(self._dir, model_artifact.CHECKPOINT_PREFIX + ".index")
        with open(index, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        write_json(os.path.join(self._dir, model_artifact.CHECKPOINT_EPOCH_FILE),
                   {"epoch": epoch + 1, "index_sha256": digest})
        if self._keep:
            self._keep_for_evaluator(epoch + 1)

    def _keep_for_evaluator(self, epoch: int) -> None:
        """Copies this epoch's checkpoint files into `pending/epoch-<n>/` (renamed into place
        whole, so the evaluator never sees a part of it)."""
        pending = os.path.join(self._dir, model_artifact.PENDING_CHECKPOINTS_DIR)
        final = os.path.join(pending, f"epoch-{epoch:05d}")
        staging = os.path.join(pending, f".epoch-{epoch:05d}.tmp")
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(staging)
        for name in os.listdir(self._dir):
            if name.startswith(model_artifact.CHECKPOINT_PREFIX + "."):
                source = os.path.join(self._dir, name)
                if os.path.isfile(source):  # copied: the next save rewrites the files in place
                    shutil.copyfile(source, os.path.join(staging, name))
        shutil.rmtree(final, ignore_errors=True)
        os.rename(staging, final)


def make_callbacks(job: config.JobConfig, role: Role, meter, steps: int, global_batch: int,
                   validation: Optional[Callable[[tf.keras.Model], Dict[str, float]]] = None):
    """The replica's callbacks, its `HistoryWriter`, the backup directory and its early
    stopping (`early_stopping.KeepBestEpoch`; None when it is off).

    Args:
      job: The job.
      role: This replica's role.
      meter: The input-wait meter, or None.
      steps: Steps per epoch.
      global_batch: Examples per step over all replicas.
      validation: The leader's per-epoch validation (`epoch_validation`), or None.
    """
    training = job.training
    backup_dir = os.path.join(job.model_dir, model_artifact.BACKUP_DIR)
    checkpoints_dir = os.path.join(job.model_dir, model_artifact.CHECKPOINTS_DIR)
    # Each epoch's copy is kept for an evaluator sharing this directory (the local backend); on a
    # cluster the evaluator follows the published latest checkpoint, and the last one is awaited.
    keep_for_evaluator = job.job.evaluator and not job.state_uri
    checkpoint = tf.keras.callbacks.ModelCheckpoint(
        os.path.join(checkpoints_dir, model_artifact.CHECKPOINT_PREFIX), save_weights_only=True)
    history = HistoryWriter(os.path.join(job.model_dir, model_artifact.HISTORY_FILE), role.leader,
                            validation)
    # The history before the backups: its epoch time is the steps' time, before they are written.
    # The meter first: its epoch ends before any other callback validates or saves.
    callbacks: List[tf.keras.callbacks.Callback] = [meter] if meter is not None else []
    if role.hvd is not None:
        # Broadcast first (identical start), average metrics before anything reads them. The
        # history after that: it records the averages, and its validation metrics (rank 0's
        # alone) must not reach the average, an all-reduce the other ranks would never join.
        callbacks += [role.hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                      role.hvd.callbacks.MetricAverageCallback(), history]
        if role.leader:
            callbacks += [tf.keras.callbacks.BackupAndRestore(backup_dir), _EpochsDone(backup_dir),
                          checkpoint, CheckpointEpoch(checkpoints_dir, keep_for_evaluator)]
    else:
        callbacks += [history, tf.keras.callbacks.BackupAndRestore(backup_dir), checkpoint]
        if role.leader:
            callbacks.append(CheckpointEpoch(checkpoints_dir, keep_for_evaluator))
    callbacks.append(EpochLogger(training.epochs, steps * global_batch, role.leader, history))
    keeper = None
    if training.early_stopping_patience is not None:
        # After the backups (its weights file is written only once the epoch's backup is) and
        # before the publishing below.
        keeper = early_stopping.KeepBestEpoch(role, training.early_stopping_patience, history,
                                              backup_dir, training.early_stopping_min_delta)
        callbacks.append(keeper)
    if role.leader:  # before the publishing below, so each epoch's events go with it
        callbacks.append(tensorboard_events.EpochSummaries(job.model_dir, steps * global_batch,
                                                           history))
    status = trainer_status.reporter(role.leader, training.epochs, steps * global_batch, history)
    if status is not None:
        callbacks.append(status)
    if job.state_uri and role.leader:
        from kfdist.components.train_distributed.replica import backup_sync

        callbacks.append(backup_sync.PublishEachEpoch(job.model_dir, job.state_uri))
    return callbacks, history, backup_dir, keeper
