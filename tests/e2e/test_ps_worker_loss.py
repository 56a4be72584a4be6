"""A parameter-server worker SIGKILLed mid-epoch, locally (the same as a TFJob on the real
Training Operator: tests/containers/test_ps_worker_loss_on_the_bed.py): what happens.

Under `parameter_server` the chief's ClusterCoordinator dispatches steps to the
workers; a worker that dies loses the steps it was running. The coordinator
re-runs them on the workers that remain, and uses the worker again once it is
back (restarted by the local supervisor, or its pod re-created by the
operator under `ExitCode`). The chief itself keeps going: no backup is
restored, no epoch is redone, and the job ends at the accuracy target.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from typing import Callable, List

import pytest

from kfdist.components.evaluate_model.runtime import evaluate
from kfdist.components.train_distributed import runtime

pytestmark = pytest.mark.slow

EPOCHS = 4
KILL_AFTER_EPOCH = 1
SETTINGS = dict(strategy="parameter_server", workers=2, ps=1, epochs=EPOCHS,
                batch_size_per_replica=16, restart_policy="ExitCode")


class Log:
    """Collects the step's log lines."""

    def __init__(self):
        self.lines: List[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)

    def starting(self, prefix: str) -> List[str]:
        return [line for line in self.lines if line.startswith(prefix)]


class KillWorkerOne(Log):
    """The step's log; SIGKILLs worker 1 (`kill(log)`) shortly after the chief logs epoch
    `KILL_AFTER_EPOCH`."""

    def __init__(self, kill: Callable[["KillWorkerOne"], None]):
        super().__init__()
        self.kill = kill
        self.killed = threading.Event()

    def __call__(self, line: str) -> None:
        super().__call__(line)
        if (re.match(rf"\[chief-0\] epoch {KILL_AFTER_EPOCH}/", line)
                and not self.killed.is_set()):
            self.killed.set()
            threading.Timer(0.3, self.kill, (self,)).start()

    def chief_epochs(self):
        return [int(m.group(1)) for line in self.lines
                for m in [re.match(r"\[chief-0\] epoch (\d+)/", line)] if m]


def _local_worker_1(log: Log) -> int:
    [pid] = {int(m.group(1)) for line in log.lines
             for m in [re.search(r"replica worker:1 pid=(\d+)", line)] if m}
    return pid


def _check_the_chief_carried_on(report, log: KillWorkerOne, model_dir: str, dataset: str) -> None:
    assert log.killed.is_set()
    assert log.chief_epochs() == list(range(1, EPOCHS + 1))  # every epoch once: nothing redone
    assert not [line for line in log.lines if "resuming from the backup" in line]
    assert report.epochs == EPOCHS and report.initial_epoch == 0
    assert evaluate(model_dir, dataset, log=lambda line: None).accuracy >= 0.90


def test_a_killed_ps_worker_is_restarted_locally_and_the_chief_carries_on(digits_dataset,
                                                                         tmp_path):
    log = KillWorkerOne(lambda log: os.kill(_local_worker_1(log), signal.SIGKILL))
    model_dir = str(tmp_path / "model")
    report = runtime.train(digits_dataset, model_dir, log=log, **SETTINGS)
    _check_the_chief_carried_on(report, log, model_dir, digits_dataset)
    # The coordinator saw its steps on worker 1 fail, and ran them on worker 0 meanwhile.
    assert any("Worker /job:worker/replica:0/task:1 failed with UnavailableError" in line
               for line in log.starting("[chief-0] ")), log.lines
    assert any("worker-1 exited with code 137; restarting it" in line for line in log.lines)
    assert report.restarts == 1  # worker 1 only: the chief and the PS never failed
