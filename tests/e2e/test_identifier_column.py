"""`kfdist run tabular` on a table with a unique string id: the id is left out, not memorised.

The table (generated: 1,600 rows) has four numeric columns that decide a
3-class label (30% of the labels flipped at random, so that memorising rows
pays in training), and an `id` column with a value of its own per row. Its
`train.csv`/`test.csv` files are the train and eval splits, the same for the
table with the id and the one without. Kept as a one-hot feature, the id
lets the model memorise the train rows, and every eval row falls into its
"unknown" slot: held-out accuracy drops well below that of the table without
it. Left out, the held-out accuracy is that of the table without the id
(within `TOLERANCE`), and the shard log, the dataset's metadata and the
evaluation report say the column was left out. These two runs train in one
process (`mirrored`): the effect of leaving the id out does not depend on the
strategy. The run that keeps the id trains with the default strategy, whose
held-out loss turns up as the rows are memorised.
"""

import csv
import glob
import html
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow

ROWS, LABEL_NOISE = 1_600, 0.3
#: Every run's options besides its data, output and strategy.
RUN_OPTIONS = ("--label-column", "label", "--accuracy-threshold", "0.3")
#: How much lower the held-out accuracy with the id may be than without it.
TOLERANCE = 0.02


def write_table(root: str, with_id: bool, seed: int = 7) -> str:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(ROWS, 4))
    weights = np.array([[1.5, -1, 0.5, 0], [-1, 1.5, 0, 0.5], [0, 0, -1, 1.5]])
    labels = np.argmax(x @ weights.T, axis=1)
    labels = np.where(rng.random(ROWS) < LABEL_NOISE, rng.integers(0, 3, ROWS), labels)
    ids = [f"row-{rng.integers(10**9):09d}-{i}" for i in range(ROWS)]
    os.makedirs(root)
    train_rows = int(ROWS * 0.75)
    for name, rows in (("train.csv", range(train_rows)), ("test.csv", range(train_rows, ROWS))):
        with open(os.path.join(root, name), "w", newline="") as f:
            out = csv.writer(f)
            out.writerow((["id"] if with_id else []) + ["a", "b", "c", "d", "label"])
            for i in rows:
                out.writerow(([ids[i]] if with_id else []) + [f"{v:.4f}" for v in x[i]]
                             + [int(labels[i])])
    return root


def kfdist_run(data: str, out: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "kfdist", "run", "tabular", "--data", data, *RUN_OPTIONS,
         "--strategy", "mirrored", "--output", out],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def only(pattern: str) -> str:
    [path] = glob.glob(pattern, recursive=True)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("identifier")
    summaries = {}
    for name, with_id in (("with_id", True), ("without_id", False)):
        data = write_table(str(tmp / f"data_{name}"), with_id)
        summaries[name] = (kfdist_run(data, str(tmp / f"run_{name}")), str(tmp / f"run_{name}"))
    return summaries


def test_the_id_column_does_not_lower_held_out_accuracy(runs):
    accuracy = {name: summary["eval"]["accuracy"] for name, (summary, _) in runs.items()}
    train = {name: summary["train"]["final_accuracy"] for name, (summary, _) in runs.items()}
    print(f"held-out accuracy {accuracy}, final training accuracy {train}")
    assert accuracy["with_id"] >= accuracy["without_id"] - TOLERANCE, (accuracy, train)


def test_the_shard_log_metadata_and_report_say_the_id_was_left_out(runs):
    _, out = runs["with_id"]
    with open(os.path.join(out, "logs", "shard.log")) as f:
        log = f.read()
    assert ("column 'id': 1,200 distinct values in 1,200 train rows (100%): an identifier, not "
            "a feature; excluded") in log
    root = os.path.join(out, "pipeline_root", "**")
    with open(only(os.path.join(root, "shard-dataset", "**", "metadata.json"))) as f:
        meta = json.load(f)
    assert meta["excluded_columns"] == [{"name": "id", "reason": "identifier",
                                         "distinct_values": 1200, "train_rows": 1200}]
    assert meta["feature"]["columns"] == ["a", "b", "c", "d"]
    assert meta["feature"]["categorical_columns"] is None
    for report in ("report", "summary"):
        with open(only(os.path.join(root, "evaluate-model", report))) as f:
            text = html.unescape(f.read())
        assert "column 'id': 1,200 distinct values in 1,200 train rows (100%)" in text, report


def test_a_kept_id_is_memorised_and_the_console_and_report_say_so(tmp_path):
    data = write_table(str(tmp_path / "data"), with_id=True)
    out = str(tmp_path / "run")
    proc = subprocess.run(
        [sys.executable, "-m", "kfdist", "run", "tabular", "--data", data, *RUN_OPTIONS,
         "--keep-columns", "id",
         # every epoch trained: early stopping would keep an epoch before the rows are memorised
         "--early-stopping-patience", "0", "--output", out],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    training, held_out = summary["train"]["final_accuracy"], summary["eval"]["accuracy"]
    assert training - held_out > 0.1, (training, held_out)  # the rows memorised, not the task
    # The advice reads the curves: held-out loss turned up while the training loss kept falling.
    said = re.search(r"warning: (held-out loss was lowest at epoch (\d+) \(.*\) and rose to .* "
                     r"the model over-fits after epoch \2, yet the last epoch was kept; [^\n]*)",
                     proc.stdout)
    assert said, proc.stdout
    with open(summary["report"]) as f:
        report = html.unescape(f.read())
    first = said[1].split(";")[0]
    assert first[0].upper() + first[1:] in report
