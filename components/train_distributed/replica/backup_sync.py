"""Keeps a cluster job's training state at its shared model location, epoch by epoch.

A replica pod's disk dies with the pod, so on a cluster the leader copies what
`BackupAndRestore` and `ModelCheckpoint` wrote (`backup/`, `checkpoints/`,
`history.json`) to `<work location>/model/` after every epoch. A restarted
replica, or every replica of a retried step, restores that state before
training and resumes from it; the evaluator replica follows the checkpoints
there. Locally the model directory is already shared, so none of this runs.
"""

from __future__ import annotations

import os
from typing import Callable, List

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import tensorflow as tf

from kfdist.components.common import model_artifact, storage

#: What a resumed replica needs: the backup (weights, optimizer, epoch) and the history so far.
STATE_ENTRIES: List[str] = list(model_artifact.TRAINING_STATE_ENTRIES)


def restore(model_uri: str, model_dir: str, log: Callable[[str], None]) -> bool:
    """Copies the shared training state into `model_dir`; returns whether there was a backup."""
    if not storage.list_uris(storage.join(model_uri, model_artifact.BACKUP_DIR)):
        return False
    for entry in STATE_ENTRIES:
        source = storage.join(model_uri, entry)
        if not storage.list_uris(source):
            continue
        if entry == model_artifact.HISTORY_FILE:
            storage.download(source, os.path.join(model_dir, entry))
        else:
            storage.copy_dir_from(source, os.path.join(model_dir, entry))
    log(f"restored the training state of an interrupted attempt from {model_uri}")
    return True


def publish(model_dir: str, model_uri: str) -> None:
    """Copies the current training state from `model_dir` to the shared location."""
    for entry in STATE_ENTRIES:
        path = os.path.join(model_dir, entry)
        if os.path.isdir(path):
            storage.copy_dir_to(path, storage.join(model_uri, entry))
        elif os.path.isfile(path):
            storage.upload_file(path, storage.join(model_uri, entry))


def discard_backup(model_uri: str) -> None:
    """Removes the shared backup once training has finished (a retry must not resume it)."""
    storage.remove_tree(storage.join(model_uri, model_artifact.BACKUP_DIR))


class PublishEachEpoch(tf.keras.callbacks.Callback):
    """Publishes the training state after each epoch (after the callbacks that write it)."""

    def __init__(self, model_dir: str, model_uri: str):
        super().__init__()
        self._model_dir = model_dir
        self._model_uri = model_uri

    def on_epoch_end(self, epoch, logs=None):
        publish(self._model_dir, self._model_uri)
