"""Early stopping keeps the best epoch under every strategy, and across a restarted replica.

Real training on scikit-learn's breast cancer table (written to CSV, sharded by
the shard step) at a learning rate (0.05) at which the loss on the validation
part rises after the first epoch or two:

* each strategy (mirrored, multi_worker_mirrored, parameter_server with an
  evaluator, horovod) runs a few epochs with patience 1 or 2: training stops
  after the same epoch in every replica, and the saved model is the kept
  epoch's: its held-out loss, as `evaluate_model` computes it, is the one the
  leader recorded after the kept epoch, not after the last; the replicas end
  with the same weights;
* a multi_worker_mirrored job whose worker 1 is killed as epoch 2 ends (the
  validation loss was lowest after epoch 1; patience 1) is restarted from the
  backup of epoch 2: its replicas recompute the decision from the history,
  take epoch 1's weights from beside the backup and train no further.
"""

from __future__ import annotations

import json
import os
import re
import signal

import pytest

from kfdist.components.common import model_artifact
from kfdist.components.common.kept_epoch import SELECTION_LOSS, decide
from kfdist.components.evaluate_model.runtime import evaluate
from kfdist.components.train_distributed import runtime

SETTINGS = dict(learning_rate=0.05, batch_size_per_replica=32)


@pytest.fixture(scope="module")
def cancer_dataset(tmp_path_factory) -> str:
    from sklearn.datasets import load_breast_cancer

    from kfdist.components.shard_dataset import runtime as shard_runtime

    root = tmp_path_factory.mktemp("breast_cancer")
    load_breast_cancer(as_frame=True).frame.to_csv(root / "breast_cancer.csv", index=False)
    shard_runtime.shard(str(root / "breast_cancer.csv"), str(root / "dataset"),
                        source_format="csv", label_column="target", log=lambda _: None)
    return str(root / "dataset")


def _history(model_dir: str) -> list:
    with open(os.path.join(model_dir, model_artifact.HISTORY_FILE)) as f:
        return json.load(f)["epochs"]


def assert_the_kept_epoch_was_saved(report, model_dir: str, dataset_dir: str) -> list:
    """The report's kept epoch is the rule's over the history, and the saved model holds its
    weights: `evaluate_model`'s held-out loss is the one recorded after it."""
    entries = _history(model_dir)
    assert [e["epoch"] for e in entries] == list(range(1, report.epochs + 1))
    rule = (report.early_stopping_patience, report.early_stopping_min_delta)
    losses = [e[SELECTION_LOSS] for e in entries]
    assert report.kept_epoch == decide(losses, *rule).best_epoch
    # Stopped after the first epoch the rule said to, or ran every epoch.
    said_stop = [decide(losses[:n], *rule).stop for n in range(1, len(losses) + 1)]
    assert not any(said_stop[:-1])
    assert said_stop[-1] or report.epochs == report.epochs_planned
    kept = entries[report.kept_epoch - 1]
    held_out = evaluate(model_dir, dataset_dir, log=lambda _: None)
    assert held_out.loss == pytest.approx(kept["val_loss"], abs=1e-5)
    assert held_out.accuracy == pytest.approx(kept["val_accuracy"], abs=1e-9)
    assert (report.final_val_loss, report.final_loss) == (kept["val_loss"], kept["loss"])
    assert report.kept_validation_loss == kept[SELECTION_LOSS]
    if report.kept_epoch < report.epochs:
        assert held_out.loss != pytest.approx(entries[-1]["val_loss"], abs=1e-5)
    return entries


#: More epochs than a run needs: early stopping ends it after the first rise (epoch 2 to 4), and
#: parameter_server's asynchronous updates once lowered the validation loss for four epochs.
PLANNED_EPOCHS = 8
STRATEGY_RUNS = {
    "mirrored": dict(strategy="mirrored", workers=1, early_stopping_patience=1),
    "multi_worker_mirrored": dict(strategy="multi_worker_mirrored", workers=2,
                                  early_stopping_patience=2),
    "parameter_server": dict(strategy="parameter_server", workers=2, ps=1, evaluator=True,
                             early_stopping_patience=1),
    "horovod": dict(strategy="horovod", workers=2, early_stopping_patience=1),
}


@pytest.mark.parametrize("name", list(STRATEGY_RUNS))
def test_each_strategy_stops_together_and_saves_the_best_epoch(name, cancer_dataset, tmp_path):
    lines = []
    report = runtime.train(cancer_dataset, str(tmp_path / "model"), log=lines.append,
                           epochs=PLANNED_EPOCHS, **SETTINGS, **STRATEGY_RUNS[name])
    model_dir = str(tmp_path / "model")
    assert_the_kept_epoch_was_saved(report, model_dir, cancer_dataset)
    assert report.kept_epoch < report.epochs, "the validation loss never rose: nothing shown"
    assert len({r.weights_sha256 for r in report.replicas}) == 1
    said = [line for line in lines if "train_distributed: kept epoch" in line]
    assert said == [f"train_distributed: {report.kept().describe()}"]
    assert not os.path.exists(os.path.join(model_dir, model_artifact.BACKUP_DIR))
    if name == "parameter_server":  # the evaluator saw every epoch, the last one included
        assert [e["epoch"] for e in report.evaluations][-1] == report.epochs


class KillWorkerOneAfter:
    """A log sink that SIGKILLs worker 1 as soon as the chief logs epoch `epoch`'s line."""

    def __init__(self, epoch: int):
        self.lines, self.pid, self.killed, self._epoch = [], None, False, epoch

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        found = re.search(r"replica worker:1 pid=(\d+)", line)
        if found:
            self.pid = int(found.group(1))
        if line.startswith(f"[worker-0] epoch {self._epoch}/") and not self.killed:
            self.killed = True
            os.kill(self.pid, signal.SIGKILL)


def test_a_restarted_job_keeps_the_best_epoch_from_before_the_restart(cancer_dataset, tmp_path):
    log = KillWorkerOneAfter(epoch=2)
    report = runtime.train(cancer_dataset, str(tmp_path / "model"), log=log,
                           strategy="multi_worker_mirrored", workers=2, epochs=6,
                           early_stopping_patience=1, restart_policy="ExitCode", **SETTINGS)
    assert log.killed and report.restarts >= 1
    assert report.initial_epoch == 2  # the backup of epoch 2: nothing left to train
    assert_the_kept_epoch_was_saved(report, str(tmp_path / "model"), cancer_dataset)
    # The restarted replicas recomputed the decision (epoch 1 best, one epoch without a
    # lower loss: stop) and took epoch 1's weights from the file beside the backup.
    assert (report.kept_epoch, report.epochs) == (1, 2)
    resumed = [line for line in log.lines if "early stopping resumed" in line]
    assert resumed == ["[worker-0] early stopping resumed: best epoch so far 1, its weights "
                       "restored"]
    assert sum("training had stopped early after epoch 2: nothing left to train" in line
               for line in log.lines) == 2  # in both workers
