"""Every strategy trains for real on this machine, through `kfdist train`, and is really distributed.

* `mirrored`, `parameter_server` (chief + 2 PS + 2 workers + evaluator) and
  `horovod` (`mpirun`, 2 ranks) each reach the held-out accuracy target
  (`multi_worker_mirrored` is covered by test_train_local.py and the e2e test);
* horovod ranks end with identical weights, and its optimizer really averages
  gradients (a one-step check with different data per rank);
* under parameter_server every variable lives on a PS task, spread over both.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kfdist.cli import main as kfdist_main
from kfdist.components.common import model_artifact

ACCURACY_TARGET = 0.90


def _train(tmp_path_factory, digits_dataset, name, *args):
    """Runs `kfdist train`; returns the summary, the run directory and what it printed."""
    out = tmp_path_factory.mktemp(name)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # the step's log, every replica's lines
        code = kfdist_main(["train", "--dataset", digits_dataset, "--output", str(out),
                            "--epochs", "10", *args])
    assert code == 0
    with open(out / "train-summary.json") as f:
        return json.load(f), out, printed.getvalue()


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory, digits_dataset):
    return _train(tmp_path_factory, digits_dataset, "mirrored", "--strategy", "mirrored",
                  "--workers", "1")


@pytest.fixture(scope="module")
def parameter_server(tmp_path_factory, digits_dataset):
    return _train(tmp_path_factory, digits_dataset, "ps", "--strategy", "parameter_server",
                  "--workers", "2", "--ps", "2", "--evaluator")


@pytest.fixture(scope="module")
def horovod(tmp_path_factory, digits_dataset):
    return _train(tmp_path_factory, digits_dataset, "horovod", "--strategy", "horovod",
                  "--workers", "2", "--restart-policy", "OnFailure")


@pytest.mark.parametrize("run", ["mirrored", "parameter_server", "horovod"])
def test_each_strategy_reaches_the_accuracy_target(run, request):
    summary, out, _ = request.getfixturevalue(run)
    assert summary["training"]["strategy"] == run
    assert summary["eval"]["accuracy"] >= ACCURACY_TARGET, summary["eval"]
    assert summary["training"]["epochs"] == 10
    assert os.path.isfile(out / "model" / model_artifact.SAVED_MODEL_DIR / "saved_model.pb")
    assert not os.path.exists(out / "model" / model_artifact.BACKUP_DIR)  # finished: nothing to resume


@pytest.mark.parametrize("run", ["mirrored", "parameter_server", "horovod"])
def test_the_leader_validates_every_epoch_like_evaluate_model(run, request):
    """Per-epoch validation works alike under every strategy; after the kept epoch it scored
    the weights the model artifact holds, as `evaluate_model` does (the summary's `eval`)."""
    summary, out, printed = request.getfixturevalue(run)
    with open(out / "model" / model_artifact.HISTORY_FILE) as f:
        entries = json.load(f)["epochs"]
    assert len(entries) == 10
    assert all({"val_loss", "val_accuracy", model_artifact.VALIDATION_SECONDS} <= set(e)
               for e in entries), entries
    kept = entries[summary["training"]["kept_epoch"] - 1]  # the epoch saved (early stopping)
    assert kept["val_accuracy"] == pytest.approx(summary["eval"]["accuracy"], abs=1e-6)
    assert kept["val_loss"] == pytest.approx(summary["eval"]["loss"], abs=1e-4)
    assert summary["training"]["final_val_accuracy"] == kept["val_accuracy"]
    assert summary["training"]["final_val_loss"] == kept["val_loss"]
    assert re.search(r"\] epoch 10/10: .*val_accuracy=", printed)


def test_all_reduce_strategies_report_their_input_bound_fraction(mirrored, horovod):
    for summary, _, _ in (mirrored, horovod):
        fraction = summary["training"]["input_bound_fraction"]
        assert fraction is not None and 0.0 <= fraction <= 1.0


def test_horovod_ranks_end_with_identical_weights(horovod):
    summary, _, _ = horovod
    weights = summary["replica_weights_sha256"]
    assert sorted(weights) == ["rank:0", "rank:1"]
    assert len(set(weights.values())) == 1


def test_parameter_server_variables_live_on_both_ps_tasks(parameter_server):
    summary, out, _ = parameter_server
    report = model_artifact.read_training_report(str(out / "model"))
    [chief] = report.replicas
    assert chief.task == "chief:0"
    devices = chief.variable_devices
    assert devices and all(d.startswith("/job:ps/") for d in devices), devices
    assert {d.split("/task:")[1].split("/")[0] for d in devices} == {"0", "1"}


def test_parameter_server_evaluator_runs_beside_training_and_is_ended(parameter_server):
    summary, _, printed = parameter_server
    assert summary["training"]["restarts"] == 0
    # The evaluator never ends by itself: the job ends it (and the servers) once the chief is done.
    [ended] = [line for line in printed.splitlines()
               if line.startswith("job succeeded; ending the replicas still running: ")]
    assert ended.split(": ", 1)[1].split(", ") == ["worker-0", "worker-1", "ps-0", "ps-1",
                                                   "evaluator-0"]


GRADIENT_PROBE = textwrap.dedent("""
    import json, sys
    from kfdist.components.common import legacy_keras
    import numpy as np
    import tensorflow as tf
    from kfdist.components.train_distributed.replica.horovod_support import horovod_keras

    hvd = horovod_keras()
    hvd.init()
    rank = hvd.rank()
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros",
                                                       input_shape=(1,))])
    model.compile(optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.SGD(1.0)), loss="mse")
    # Rank r sees x=1, y=r+1: its own gradient of (y - w x)^2 at w=0 is -2(r+1).
    model.fit(np.ones((1, 1), np.float32), np.full((1, 1), rank + 1, np.float32),
              epochs=1, batch_size=1, verbose=0)
    print(json.dumps({"rank": rank, "w": float(model.get_weights()[0][0][0])}), flush=True)
""")


def test_horovod_averages_gradients_across_ranks(tmp_path):
    """With averaging both ranks step by the mean gradient -3 (w = 3); without, w = 2 and 4."""
    script = tmp_path / "probe.py"
    script.write_text(GRADIENT_PROBE)
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    done = subprocess.run(["mpirun", "-np", "2", "--bind-to", "none", sys.executable, str(script)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # mpirun may interleave the ranks' lines: pick the JSON objects out of the stream.
    results = [json.loads(m) for m in re.findall(r'\{"rank": \d+, "w": [^}]+\}', done.stdout)]
    assert sorted(r["rank"] for r in results) == [0, 1]
    assert all(np.isclose(r["w"], 3.0) for r in results), results
