"""`kfdist run tabular` on scikit-learn's breast cancer and wine tables keeps its best epoch,
and says so.

With the tabular pipeline's defaults (30 epochs at learning rate 0.01, two
multi_worker_mirrored workers, early stopping on with patience 5 and min_delta
0.001) the held-out loss bottoms out after a few epochs and rises while
training goes on. On breast cancer the validation part's loss rises too; on
wine (14 easy rows) it creeps towards zero for all 30 epochs, and only
min_delta stops it. The run must stop early, export the best epoch's weights (the
evaluation's held-out loss is the one recorded after the kept epoch, not after
the last), never choose by the eval split (the validation part is train
records, none of them held out), and say which epoch it kept and why on the
console, in `summary.json` and in the report, with over-fitting advice read
from the curves.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import subprocess
import sys

import pytest

from kfdist.components.common import dataset_spec, model_artifact
from kfdist.components.common.kept_epoch import SELECTION_LOSS, decide
from kfdist.flag_wording import command_wording

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["breast_cancer", "wine"])
def run(request, tmp_path_factory):
    import sklearn.datasets

    root = tmp_path_factory.mktemp("best_epoch")
    csv = root / f"{request.param}.csv"
    getattr(sklearn.datasets, f"load_{request.param}")(as_frame=True).frame.to_csv(csv, index=False)
    out = root / "run"
    done = subprocess.run([sys.executable, "-m", "kfdist", "run", "tabular", "--data", str(csv),
                           "--label-column", "target", "--output", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(out / "summary.json") as f:
        summary = json.load(f)
    [model_dir] = glob.glob(str(out / "pipeline_root" / "*" / "train-distributed" / "model"))
    [dataset_dir] = glob.glob(str(out / "pipeline_root" / "*" / "shard-dataset" / "dataset"))
    return done.stdout, summary, str(out), model_dir, dataset_dir


def test_training_stops_early_and_exports_the_best_epoch(run):
    from kfdist.components.evaluate_model.runtime import evaluate

    _, summary, _, model_dir, dataset_dir = run
    trained = summary["train"]
    with open(os.path.join(model_dir, model_artifact.HISTORY_FILE)) as f:
        entries = json.load(f)["epochs"]
    kept = trained["kept_epoch"]
    assert trained["stopped_early"] and kept < trained["epochs_run"] == len(entries) < 30
    assert trained["early_stopping_patience"] == 5
    assert trained["early_stopping_min_delta"] == 0.001
    assert trained["epochs_run"] == kept + 5  # five epochs without a lower validation loss
    assert kept == decide([e[SELECTION_LOSS] for e in entries], 5, 0.001).best_epoch
    # The evaluation scored the kept epoch's weights: its held-out loss, not the last epoch's.
    held_out = evaluate(model_dir, dataset_dir, log=lambda _: None)
    assert held_out.loss == pytest.approx(entries[kept - 1]["val_loss"], abs=1e-5)
    assert held_out.loss != pytest.approx(entries[-1]["val_loss"], abs=1e-5)
    assert summary["eval"]["accuracy"] == pytest.approx(entries[kept - 1]["val_accuracy"])
    assert trained["final_val_accuracy"] == entries[kept - 1]["val_accuracy"]
    # The epoch kept is near the held-out minimum, never the epochs of over-fitting after it
    # (wine without min_delta: epoch 30 of 30, its held-out loss three times the lowest).
    lowest = min(e["val_loss"] for e in entries)
    assert held_out.loss < 1.5 * lowest, (held_out.loss, lowest)


def test_the_validation_part_is_train_records_never_the_eval_split(run):
    import tensorflow as tf

    from kfdist.components.common import tf_features
    from kfdist.components.train_distributed.replica import validation_input

    _, _, out, _, dataset_dir = run
    meta = dataset_spec.load_metadata(dataset_dir)

    def rows(batches):  # each example's preprocessed features, as bytes
        return [r.numpy() for r in batches.unbatch().map(lambda x, y: tf.io.serialize_tensor(x))]

    validation = rows(validation_input.validation_batches(meta, dataset_dir, 0.1))
    train = set(rows(tf_features.split_batches(meta, dataset_dir, "train", 64)))
    held_out = set(rows(tf_features.split_batches(meta, dataset_dir, "eval", 64)))
    assert len(train) == meta.splits["train"].num_examples  # every row told apart
    assert len(validation) == math.floor(len(train) * 0.1)
    assert set(validation) <= train and not set(validation) & held_out
    with open(os.path.join(out, "logs", "train.log")) as f:
        assert (f"validation part of {len(validation)} train examples (0.1 of the train split, "
                "not trained on)") in f.read()


def test_the_console_summary_and_report_say_which_epoch_and_why(run):
    stdout, summary, out, _, _ = run
    trained = summary["train"]
    kept, ran = trained["kept_epoch"], trained["epochs_run"]
    why = (f"kept epoch {kept} (the best validation loss, {trained['kept_validation_loss']:.4f})"
           f"; stopped after epoch {ran} of 30: no validation loss more than 0.001 below it in "
           "the 5 epochs after it (patience 5)")
    assert trained["kept_why"] == why
    assert re.search(rf"  train     done in [\d.]+s: {re.escape(why)}; [\d.]+s of it in model\.fit, "
                     "training accuracy ", stdout)
    assert f"training {why}" in stdout.splitlines()
    with open(os.path.join(out, "report.html")) as f:
        page = f.read()
    assert f"The model holds the weights of epoch {kept}: {why}." in page


def test_the_over_fitting_advice_reads_the_curves(run):
    stdout, summary, out, model_dir, _ = run
    advice = summary["train"]["fit_advice"]
    kept = summary["train"]["kept_epoch"]
    held_out = model_artifact.read_history(model_dir)["val_loss"]
    # The held-out loss rose after its lowest epoch; the advice says how the kept epoch fares,
    # as a warning when its held-out loss is itself more than 20 % above the lowest.
    assert re.match(rf"held-out loss was lowest at epoch {held_out.index(min(held_out)) + 1} "
                    r"\([\d.]+\) and rose to [\d.]+ by epoch \d+", advice["text"]), advice
    assert (f"early stopping kept epoch {kept}, held-out loss {held_out[kept - 1]:.4f}"
            in advice["text"])
    assert advice["warning"] == (held_out[kept - 1] > 1.2 * min(held_out))
    level = "warning" if advice["warning"] else "note"
    # summary.json keeps the step's words; the console says the flags (wine's warning names
    # --validation-fraction and --early-stopping-min-delta).
    assert f"{level}: {command_wording('run')(advice['text'])}" in stdout.splitlines()
    with open(os.path.join(out, "report.html")) as f:
        assert f"<div class='{'warn' if advice['warning'] else 'note'}'>Held-out loss was " in (
            f.read())
