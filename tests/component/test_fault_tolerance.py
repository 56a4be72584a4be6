"""Training survives a worker killed mid-epoch, and a retried step resumes instead of starting over.

A real two-worker MultiWorkerMirrored job; worker 1 gets SIGKILL a moment into
epoch 3 (after the backup of epoch 2). Small batches make an epoch last about
a second and a half on two cores, so the kill lands inside it.
"""

from __future__ import annotations

import os
import re
import signal
import threading

import pytest

from kfdist.components.common import model_artifact
from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.evaluate_model.runtime import evaluate
from kfdist.components.train_distributed import runtime

EPOCHS = 6
KILL_AFTER_EPOCH = 2
SETTINGS = dict(strategy="multi_worker_mirrored", workers=2, epochs=EPOCHS, batch_size_per_replica=8)


class KillWorkerOneMidEpoch:
    """A log sink that SIGKILLs worker 1 shortly after the chief logs epoch `KILL_AFTER_EPOCH`."""

    def __init__(self):
        self.lines = []
        self.pid = None
        self.killed = threading.Event()

    def __call__(self, line):
        self.lines.append(line)
        found = re.search(r"replica worker:1 pid=(\d+)", line)
        if found:
            self.pid = int(found.group(1))
        if line.startswith(f"[worker-0] epoch {KILL_AFTER_EPOCH}/") and not self.killed.is_set():
            self.killed.set()
            threading.Timer(0.3, os.kill, (self.pid, signal.SIGKILL)).start()

    def completed_epochs(self):
        """Epoch numbers the chief completed, in log order (a redone epoch appears twice)."""
        return [int(m.group(1)) for line in self.lines
                for m in [re.match(r"\[worker-0\] epoch (\d+)/", line)] if m]


@pytest.fixture(scope="module")
def killed_run(digits_dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("killed")
    log = KillWorkerOneMidEpoch()
    report = runtime.train(digits_dataset, str(out / "model"), log=log, restart_policy="ExitCode",
                           **SETTINGS)
    return report, log, out


def test_the_run_completes_at_the_accuracy_target(killed_run, digits_dataset):
    report, log, out = killed_run
    assert log.killed.is_set()
    assert report.epochs == EPOCHS
    held_out = evaluate(str(out / "model"), digits_dataset, log=lambda line: None)
    assert held_out.accuracy >= 0.90


def test_the_killed_worker_and_its_peer_were_restarted(killed_run):
    report, log, _ = killed_run
    assert any("worker-1 exited with code 137; restarting it (restartPolicy ExitCode" in line
               for line in log.lines)
    # Worker 0's collectives failed when its peer died: it exits 138 and is restarted too.
    assert any("worker-0 exited with code 138; restarting it" in line for line in log.lines)
    assert report.restarts == 2


def test_only_the_interrupted_epoch_is_redone(killed_run):
    report, log, _ = killed_run
    assert log.completed_epochs() == list(range(1, EPOCHS + 1))  # each epoch completed once
    resumed = [line for line in log.lines if "resuming from the backup" in line]
    assert resumed == [f"[worker-0] resuming from the backup: epochs 1-{report.initial_epoch} are "
                       f"done, starting epoch {report.initial_epoch + 1}"]
    assert report.initial_epoch >= KILL_AFTER_EPOCH
    history = model_artifact.read_history(str(killed_run[2] / "model"))
    assert len(history["loss"]) == EPOCHS  # the history spans both lives of the job
    assert None not in history["val_accuracy"] and len(history["val_accuracy"]) == EPOCHS


def test_a_retried_step_resumes_from_what_the_failed_attempt_left(digits_dataset, tmp_path):
    model_dir = str(tmp_path / "model")
    first = KillWorkerOneMidEpoch()
    with pytest.raises(TrainingFailedError, match="restartPolicy Never does not restart exit code 137"):
        runtime.train(digits_dataset, model_dir, log=first, restart_policy="Never", **SETTINGS)
    assert set(os.listdir(model_dir)) <= set(model_artifact.TRAINING_STATE_ENTRIES)
    assert model_artifact.BACKUP_DIR in os.listdir(model_dir)
    done_before = max(first.completed_epochs())

    second = KillWorkerOneMidEpoch()
    second.killed.set()  # no kill this time
    report = runtime.train(digits_dataset, model_dir, log=second, restart_policy="Never", **SETTINGS)
    assert any("holds the backup of an interrupted attempt; resuming" in line for line in second.lines)
    assert second.completed_epochs() == list(range(done_before + 1, EPOCHS + 1))
    assert report.initial_epoch == done_before
    history = model_artifact.read_history(model_dir)
    assert len(history["loss"]) == EPOCHS
    assert None not in history["val_loss"] and len(history["val_loss"]) == EPOCHS
    assert report.final_val_loss == history["val_loss"][-1]
    assert not os.path.exists(os.path.join(model_dir, model_artifact.BACKUP_DIR))


def test_a_model_dir_with_other_files_is_still_refused(digits_dataset, tmp_path):
    model_dir = tmp_path / "model"
    (model_dir / model_artifact.BACKUP_DIR).mkdir(parents=True)
    (model_dir / "notes.txt").write_text("mine")
    with pytest.raises(Exception, match="is not empty: \\['backup', 'notes.txt'\\]"):
        runtime.train(digits_dataset, str(model_dir), **SETTINGS)
    assert (model_dir / "notes.txt").read_text() == "mine"
