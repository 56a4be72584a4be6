"""End to end on the penguins: `kfdist run tabular` against TFX's penguin pipeline.

Both get the Palmer penguins table split the same way (every fifth row held out; kfdist reads the
`train/` and `eval/` folders as its predefined split, ExampleGen the two files as its splits),
the same MLP shape (Dense 64, Dropout 0.1, Dense 32, softmax), epochs, batch and learning rate,
and the same blessing threshold. The peer's copy writes the table's `NA` cells empty, the form in
which CsvExampleGen reads a missing value (it has no NA option); kfdist reads the table as it
is. Reported: wall time per step, held-out accuracy, the blessing, and whether the exported model
answers a raw row (kfdist: the row's columns; TFX: the row as a serialized raw `tf.Example`).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict

from benchmarks import peers
from benchmarks.common import CHILD_ENV, REPO_ROOT, run_child
from benchmarks.end_to_end import _logs_of, step_seconds

#: The tabular pipeline's training settings, given to both.
SETTINGS = {"epochs": 30, "batch_size": 32, "learning_rate": 0.01, "threshold": 0.9}
LABEL = "species"

#: Scores the first held-out row with kfdist's export, its columns as the signature names them.
ANSWERS = """
import json, sys
import tensorflow as tf
row = json.loads(sys.argv[2])
signature = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
inputs = {}
for name, spec in signature.structured_input_signature[1].items():
    value = row[name]
    if spec.dtype == tf.string:
        inputs[name] = tf.constant([value])
    else:
        inputs[name] = tf.constant([float("nan") if value in ("", "NA") else float(value)])
outputs = signature(**inputs)
_RESULT = {"answers": all(int(t.shape[0]) == 1 for t in outputs.values())}
"""


def write_splits(root: str) -> Dict[str, Any]:
    """The penguins, every fifth row held out: kfdist's folders, and the peer's files."""
    from kfdist.sample_data import penguins_csv_path

    with open(penguins_csv_path(), newline="") as f:
        header, *rows = list(csv.reader(f))
    parts = {"train": [r for i, r in enumerate(rows) if i % 5],
             "eval": [r for i, r in enumerate(rows) if i % 5 == 0]}
    paths = {"kfdist": os.path.join(root, "penguins-kfdist")}
    for split, part in parts.items():
        for where, clean in ((os.path.join(paths["kfdist"], split, f"{split}.csv"), False),
                             (os.path.join(root, "penguins-tfx", f"{split}.csv"), True)):
            os.makedirs(os.path.dirname(where), exist_ok=True)
            with open(where, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(header)
                writer.writerows([["" if clean and c == "NA" else c for c in r] for r in part])
            if clean:
                paths[f"tfx_{split}"] = where
    paths["row"] = dict(zip(header, parts["eval"][0]))
    paths["rows"] = {split: len(part) for split, part in parts.items()}
    return paths


def run_kfdist(data: str, out: str, row: dict) -> Dict[str, Any]:
    """`kfdist run tabular` with the settings; its step times, accuracy and export."""
    env = dict(os.environ, **CHILD_ENV)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "kfdist", "run", "tabular", "--data", data, "--label-column",
         LABEL, "--workers", "1", "--strategy", "mirrored", "--epochs", str(SETTINGS["epochs"]),
         "--batch-size", str(SETTINGS["batch_size"]), "--learning-rate",
         str(SETTINGS["learning_rate"]), "--accuracy-threshold", str(SETTINGS["threshold"]),
         "--output", out], env=env, capture_output=True, text=True, timeout=1800, cwd=REPO_ROOT)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"kfdist run tabular failed:\n{done.stderr[-3000:]}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    export = summary["export"].get("path")
    answers = bool(export) and run_child(ANSWERS, export, json.dumps(row))["answers"]
    return {"seconds": step_seconds(_logs_of(out)), "total_seconds": round(wall, 2),
            "accuracy": round(summary["eval"]["accuracy"], 4), "blessed": summary["blessed"],
            "answers_raw_rows": answers}


def measure_penguins(root: str, log: Callable[[str], None]) -> Dict[str, Any]:
    """Both pipelines on the penguins; their figures and kfdist's speed-up."""
    python = peers.peer_python(log)
    paths = write_splits(root)
    kfdist = run_kfdist(paths["kfdist"], os.path.join(root, "penguins-run"), paths["row"])
    log(f"peers penguins: kfdist {kfdist['total_seconds']} s, accuracy {kfdist['accuracy']}")
    tfx = peers.run_tree([python, os.path.join(peers.HERE, "tfx_penguins.py"),
                          "--train-csv", paths["tfx_train"], "--eval-csv", paths["tfx_eval"],
                          "--out", os.path.join(root, "penguins-tfx-run"),
                          "--epochs", str(SETTINGS["epochs"]),
                          "--batch-size", str(SETTINGS["batch_size"]),
                          "--learning-rate", str(SETTINGS["learning_rate"]),
                          "--threshold", str(SETTINGS["threshold"])],
                         env=peers.peer_env())
    log(f"peers penguins: TFX {tfx['wall_seconds']} s, accuracy {tfx['accuracy']}")
    return {"rows": paths["rows"], "settings": SETTINGS, "kfdist": kfdist, "tfx": tfx,
            "kfdist_speedup_over_tfx": round(tfx["wall_seconds"] / kfdist["total_seconds"], 2),
            "accuracy_difference": round(kfdist["accuracy"] - tfx["accuracy"], 4),
            "one_eval_row": round(1 / paths["rows"]["eval"], 4)}


if __name__ == "__main__":  # python -m benchmarks.peer_end_to_end: one run, printed
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kfdist-peers-") as tmp:
        print(json.dumps(measure_penguins(tmp, lambda line: print(line, file=sys.stderr,
                                                                   flush=True)), indent=2))
