"""End to end on the penguins: `kfdist run tabular` against TFX's penguin pipeline.

`write_splits` and `compare` take any one-file table too (`peer_at_size` runs them at size).

Both get the Palmer penguins table split the same way (every fifth row held out; kfdist reads the
`train/` and `eval/` folders as its predefined split, ExampleGen the two files as its splits),
the same MLP shape (Dense 64, Dropout 0.1, Dense 32, softmax), epochs, batch and learning rate,
and the same blessing threshold. The peer's copy writes the table's `NA` cells empty, the form in
which CsvExampleGen reads a missing value (it has no NA option); kfdist reads the table as it
is. Both clocks stop at the same place, the end of the pipeline: kfdist's is its run's wall time
(the raw-row check runs after it), TFX's runs from its program's start to the Pusher's end (its
raw-row check follows; its Trainer is given the train split's rows, as TFX's `TrainArgs` are,
instead of counting them). Both run `repeats.REPEATS` rounds, alternating which goes first.
Reported per round and as median and spread: wall time per step, total, held-out accuracy, the
blessing, and whether the exported model answers a raw row (kfdist: the row's columns; TFX: the
row as a serialized raw `tf.Example`); kfdist's speed-up and the accuracy difference per round.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from benchmarks import peers, repeats
from benchmarks.common import CHILD_ENV, REPO_ROOT, run_child
from benchmarks.end_to_end import _logs_of, step_seconds

#: The tabular pipeline's training settings, given to both.
SETTINGS = {"epochs": 30, "batch_size": 32, "learning_rate": 0.01, "threshold": 0.9}
LABEL = "species"
#: Every this many rows, one is held out (the first of each run of them).
HOLD_OUT_EVERY = 5
SPLITS = ("train", "eval")

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


def write_splits(root: str, source: Optional[str] = None, name: str = "penguins",
                 rows: Optional[int] = None) -> Dict[str, Any]:
    """A table's rows, every fifth held out, as kfdist's folders and the peer's files.

    Args:
      root: Where `<name>-kfdist/{train,eval}/` and `<name>-tfx/{train,eval}.csv` go.
      source: One CSV file with a header; None: the bundled penguins.
      name: The prefix of the folders.
      rows: Keep the first `rows` data rows; None: all of them.

    Returns:
      `kfdist` (the folder of the split's folders), `tfx_train` and `tfx_eval` (the peer's
      files, `NA` cells written empty), `row` (the first held-out row, by column), `rows`
      (per split) and `bytes` (of kfdist's files).
    """
    if source is None:
        from kfdist.sample_data import penguins_csv_path

        source = penguins_csv_path()
    kfdist = os.path.join(root, f"{name}-kfdist")
    paths: Dict[str, Any] = {"kfdist": kfdist, "rows": {"train": 0, "eval": 0}}
    with contextlib.ExitStack() as files, open(source, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        writers = {}
        for split in SPLITS:
            paths[f"tfx_{split}"] = os.path.join(root, f"{name}-tfx", f"{split}.csv")
            for side, where in (("kfdist", os.path.join(kfdist, split, f"{split}.csv")),
                                ("tfx", paths[f"tfx_{split}"])):
                os.makedirs(os.path.dirname(where), exist_ok=True)
                writers[side, split] = csv.writer(files.enter_context(open(where, "w",
                                                                           newline="")))
                writers[side, split].writerow(header)
        for i, row in enumerate(itertools.islice(reader, rows)):
            split = "eval" if i % HOLD_OUT_EVERY == 0 else "train"
            writers["kfdist", split].writerow(row)
            writers["tfx", split].writerow(["" if c == "NA" else c for c in row])
            paths["rows"][split] += 1
            if i == 0:
                paths["row"] = dict(zip(header, row))
    paths["bytes"] = sum(os.path.getsize(os.path.join(kfdist, s, f"{s}.csv")) for s in SPLITS)
    return paths


def kfdist_command(data: str, out: str, settings: Dict[str, Any], label: str,
                   exclude: Sequence[str]) -> List[str]:
    """`kfdist run tabular`'s command line: one training process, the settings given.

    Args:
      data: The folder of the `train/` and `eval/` folders.
      out: The run's directory.
      settings: Epochs, batch size, learning rate and blessing threshold (as `SETTINGS`).
      label: The class column.
      exclude: Columns left out of the dataset and the model (identifiers).
    """
    return [sys.executable, "-m", "kfdist", "run", "tabular", "--data", data, "--label-column",
            label, *(["--exclude-columns", ",".join(exclude)] if exclude else []),
            "--workers", "1", "--strategy", "mirrored", "--epochs", str(settings["epochs"]),
            "--batch-size", str(settings["batch_size"]), "--learning-rate",
            str(settings["learning_rate"]), "--accuracy-threshold", str(settings["threshold"]),
            "--output", out]


def tfx_command(python: str, paths: Dict[str, Any], out: str, settings: Dict[str, Any],
                label: str, exclude: Sequence[str]) -> List[str]:
    """The peer pipeline's (`peers/tfx_penguins.py`) command line on `write_splits`' files,
    with the arguments `kfdist_command` takes (`exclude` left out of its schema)."""
    return [python, os.path.join(peers.HERE, "tfx_penguins.py"), "--train-csv",
            paths["tfx_train"], "--eval-csv", paths["tfx_eval"], "--out", out,
            "--epochs", str(settings["epochs"]), "--batch-size", str(settings["batch_size"]),
            "--learning-rate", str(settings["learning_rate"]),
            "--threshold", str(settings["threshold"]), "--label", label,
            "--drop", ",".join(exclude), "--train-rows", str(paths["rows"]["train"])]


def run_kfdist(command: List[str], out: str, row: dict) -> Dict[str, Any]:
    """Runs `kfdist_command`'s `command` (run directory `out`); its step times, accuracy, and
    whether its export answers the raw `row` (by column)."""
    env = dict(os.environ, **CHILD_ENV)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600,
                          cwd=REPO_ROOT)
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


def _median_steps(runs: List[Dict[str, Any]]) -> Dict[str, float]:
    """Each step's median seconds over the runs."""
    return {step: statistics.median(r["seconds"][step] for r in runs) for step in runs[0]["seconds"]}


def compare(paths: Dict[str, Any], root: str, log: Callable[[str], None], name: str = "penguins",
            settings: Dict[str, Any] = SETTINGS, label: str = LABEL,
            exclude: Sequence[str] = (), rounds: int = repeats.REPEATS) -> Dict[str, Any]:
    """Both pipelines `rounds` times on `write_splits`' `paths`, alternating which goes first;
    their figures and kfdist's speed-up, as median and spread.

    Args:
      paths: What `write_splits` returned.
      root: Where the runs go (`<name>-run-<round>`, `<name>-tfx-run-<round>`, removed after).
      log: Receives progress lines.
      name: The runs' prefix and the log's.
      settings: Epochs, batch size, learning rate and blessing threshold, for both.
      label: The class column.
      exclude: Columns both leave out (identifiers).
      rounds: How many rounds.
    """
    python = peers.peer_python(log)  # installed first: neither side's time includes it

    def ours(index: int) -> Dict[str, Any]:
        out = os.path.join(root, f"{name}-run-{index}")
        try:
            figures = run_kfdist(kfdist_command(paths["kfdist"], out, settings, label, exclude),
                                 out, paths["row"])
        finally:
            shutil.rmtree(out, ignore_errors=True)
        log(f"peers {name}: kfdist {figures['total_seconds']} s, accuracy {figures['accuracy']}")
        return figures

    def theirs(index: int) -> Dict[str, Any]:
        out = os.path.join(root, f"{name}-tfx-run-{index}")
        try:
            figures = peers.run_tree(tfx_command(python, paths, out, settings, label, exclude),
                                     env=peers.peer_env())
        finally:
            shutil.rmtree(out, ignore_errors=True)
        log(f"peers {name}: TFX {figures['pipeline_seconds']} s, accuracy {figures['accuracy']}")
        return figures

    kfdist, tfx = repeats.run_alternating([ours, theirs], rounds,
                                          lambda line: log(f"peers {name}: {line}"), pair=name)
    return {"rows": paths["rows"], "settings": settings, "rounds": rounds,
            "kfdist": {"runs": kfdist, "median_step_seconds": _median_steps(kfdist),
                       "blessed": all(r["blessed"] for r in kfdist),
                       "answers_raw_rows": all(r["answers_raw_rows"] for r in kfdist),
                       **repeats.spreads_of(kfdist, ("total_seconds",)),
                       **repeats.spreads_of(kfdist, ("accuracy",), 4)},
            "tfx": {"runs": tfx, "median_step_seconds": _median_steps(tfx),
                    "blessed": all(r["blessed"] for r in tfx),
                    "answers_raw_rows": all(r["answers_raw_rows"] for r in tfx),
                    **repeats.spreads_of(tfx, ("pipeline_seconds", "wall_seconds",
                                               "peak_tree_pss_mb")),
                    **repeats.spreads_of(tfx, ("accuracy",), 4)},
            "kfdist_speedup_over_tfx": repeats.ratios([r["pipeline_seconds"] for r in tfx],
                                                      [r["total_seconds"] for r in kfdist]),
            "accuracy_difference": repeats.spread(
                [a["accuracy"] - b["accuracy"] for a, b in zip(kfdist, tfx)], 4)}


def measure_penguins(root: str, log: Callable[[str], None],
                     rounds: int = repeats.REPEATS) -> Dict[str, Any]:
    """Both pipelines `rounds` times on the penguins; their figures and kfdist's speed-up."""
    return compare(write_splits(root), root, log, rounds=rounds)


if __name__ == "__main__":  # python -m benchmarks.peer_end_to_end: one run, printed
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kfdist-peers-") as tmp:
        print(json.dumps(measure_penguins(tmp, lambda line: print(line, file=sys.stderr,
                                                                   flush=True)), indent=2))
