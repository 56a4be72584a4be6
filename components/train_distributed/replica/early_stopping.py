"""Early stopping that keeps the best epoch, under every strategy and across restarts.

Keras's `EarlyStopping` keeps its state (best loss, best weights, epochs
waited) in memory and decides in each process by itself. Here the leader, the
only replica that validates, decides by `kept_epoch.decide` over the
validation part's losses in the history, and every training replica follows:

* `multi_worker_mirrored`: the decision (and, at the end, the best weights)
  goes from the leader to every worker in an all-reduce to which only the
  leader contributes;
* `horovod`: rank 0 broadcasts them (`broadcast_object`);
* `mirrored`, `parameter_server` (the coordinator alone runs `fit`) and a lone
  replica: one process decides and holds the weights.

Every replica stops after the same epoch. The leader copies the weights of
each new best epoch into memory and, beside `BackupAndRestore`'s backup, into
`BEST_WEIGHTS_FILE` (written after the epoch's backup). A replica restarted
from the backup of epoch `r` recomputes the decision from the history up to
`r`; the best weights are the restored ones when the best epoch is `r`, else
the file's. A job restarted after the leader had decided to stop (a replica
lost after the last epoch) raises `AlreadyStopped` from the first epoch's
start in every replica, before any step (Keras would start an epoch's steps
before it checks `stop_training`); `fit`'s caller goes on as if it returned.
"""

from __future__ import annotations

import os
from typing import List, Optional

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
import numpy as np
import tensorflow as tf

from kfdist.components.common import kept_epoch
from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed.replica.epoch_validation import local_weights
from kfdist.components.train_distributed.replica.outputs import log
from kfdist.components.train_distributed.replica.strategies import Role

#: The best epoch's weights, in the backup directory (published and restored with it).
BEST_WEIGHTS_FILE = "kfdist-best-weights.npz"
_EPOCH_KEY = "kfdist_epoch"


def _from_leader_mwms(strategy: tf.distribute.Strategy, leader: bool,
                      arrays: List[np.ndarray]) -> List[np.ndarray]:
    """The leader's `arrays` on every MultiWorkerMirrored worker: an all-reduce (a sum) to
    which only the leader's first local replica adds anything but zeros."""
    local_replicas = len(strategy.extended.worker_devices)
    mine = [tf.constant(a if leader else np.zeros_like(a)) for a in arrays]

    def keep_first_local(tensors):
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        first = tf.equal(replica % local_replicas, 0)
        return [tf.where(first, t, tf.zeros_like(t)) for t in tensors]

    @tf.function
    def all_reduce(tensors):
        return [strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                for v in strategy.run(keep_first_local, args=(tensors,))]

    return [t.numpy() for t in all_reduce(mine)]


def from_leader(role: Role, arrays: List[np.ndarray], name: str) -> List[np.ndarray]:
    """The leader's `arrays` in every training replica (the same shapes in each).

    Args:
      role: This replica's role.
      arrays: The leader's values; the others' give the shapes and dtypes.
      name: The collective's name (Horovod pairs collectives by name).
    """
    if role.hvd is not None:
        import horovod.tensorflow as hvd_tf  # bound to tf-keras already (horovod_support)

        return hvd_tf.broadcast_object(arrays, root_rank=0, name=name)
    if isinstance(role.strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return _from_leader_mwms(role.strategy, role.leader, arrays)
    return arrays


class AlreadyStopped(Exception):
    """Raised out of `fit` when a restarted job had already stopped early: nothing to train.

    Attributes:
      epochs_done: The epochs the restored backup holds.
    """

    def __init__(self, epochs_done: int):
        super().__init__(f"training had stopped early after epoch {epochs_done}")
        self.epochs_done = epochs_done


class KeepBestEpoch(tf.keras.callbacks.Callback):
    """Stops training `patience` epochs after the best validation-part loss; keeps its weights.

    Put it after the `HistoryWriter` (whose entries it reads) and the backup callbacks,
    in every training replica's callbacks; call `restore_best` after `fit`.
    """

    def __init__(self, role: Role, patience: int, history, backup_dir: str,
                 min_delta: float = 0.0):
        """
        Args:
          role: This replica's role.
          patience: Epochs without an improvement before training stops.
          history: The replica's `callbacks.HistoryWriter` (the leader's holds the losses).
          backup_dir: Where `BackupAndRestore` backs up (the weights file goes beside it).
          min_delta: How far below the best loss an epoch's must be to improve on it.
        """
        super().__init__()
        self._role = role
        self._patience = patience
        self._min_delta = min_delta
        self._history = history
        self._path = os.path.join(backup_dir, BEST_WEIGHTS_FILE)
        self._best: Optional[List[np.ndarray]] = None
        self.best_epoch: Optional[int] = None
        self._first = True

    def _decision(self) -> Optional[kept_epoch.Decision]:
        if not self._role.leader:
            return None
        entries = sorted(self._history.epochs, key=lambda e: e["epoch"])
        return kept_epoch.decide([e.get(kept_epoch.SELECTION_LOSS) for e in entries],
                                 self._patience, self._min_delta)

    def _agree_to_stop(self, decision: Optional[kept_epoch.Decision], epoch: int) -> bool:
        stop = np.array([1.0 if decision is not None and decision.stop else 0.0], np.float32)
        return bool(from_leader(self._role, [stop], f"kfdist_stop_{epoch}")[0][0] > 0.5)

    def on_epoch_begin(self, epoch, logs=None):
        if not self._first:
            return
        self._first = False
        if epoch == 0:
            return
        decision = self._decision()  # resumed from the backup of epoch `epoch`
        if decision is not None and decision.best_epoch is not None:
            self._resume_best(decision.best_epoch, epoch)
        if self._agree_to_stop(decision, epoch):
            raise AlreadyStopped(epoch)

    def _resume_best(self, best_epoch: int, restored_epoch: int) -> None:
        """The leader's best weights after a restart: the restored ones or the file's."""
        self.best_epoch = best_epoch
        if best_epoch == restored_epoch:
            self._best = local_weights(self.model)
            log(f"early stopping resumed: best epoch so far {best_epoch}, the one restored")
            return
        try:
            with np.load(self._path) as saved:
                epoch = int(saved[_EPOCH_KEY])
                arrays = [saved[f"arr_{i}"] for i in range(len(saved.files) - 1)]
        except FileNotFoundError:
            epoch, arrays = None, []
        if epoch != best_epoch:
            raise TrainingFailedError(
                f"resuming after epoch {restored_epoch}, the best epoch is {best_epoch} but "
                f"{self._path} holds {'nothing' if epoch is None else f'epoch {epoch}'}'s "
                "weights; start the training over in an empty model location")
        self._best = arrays
        log(f"early stopping resumed: best epoch so far {best_epoch}, its weights restored")

    def on_epoch_end(self, epoch, logs=None):
        decision = self._decision()
        if decision is not None and decision.improved:
            self._best, self.best_epoch = local_weights(self.model), epoch + 1
            self._save_best(epoch + 1)
        if self._agree_to_stop(decision, epoch + 1):
            self.model.stop_training = True
            if self._role.leader:
                lacked = kept_epoch.no_improvement(self._min_delta, f"epoch {self.best_epoch}'s")
                log(f"early stopping after epoch {epoch + 1}: {lacked} since epoch "
                    f"{self.best_epoch} ({self._patience} epochs)")

    def _save_best(self, epoch: int) -> None:
        """Writes the best weights beside the backup, whole or not at all."""
        os.makedirs(os.path.dirname(self._path), exist_ok=True)
        staging = f"{self._path}.tmp-{os.getpid()}.npz"
        np.savez(staging, *self._best, **{_EPOCH_KEY: np.int64(epoch)})
        os.replace(staging, self._path)

    def restore_best(self, model: tf.keras.Model) -> None:
        """Gives every training replica the best epoch's weights (the leader's); call after `fit`
        in every training replica."""
        current = local_weights(model)
        best = self._best if self._role.leader and self._best is not None else current
        model.set_weights(from_leader(self._role, best, "kfdist_best_weights"))
        if self._role.leader and self.best_epoch is not None:
            log(f"kept the weights of epoch {self.best_epoch}, the best validation loss")
