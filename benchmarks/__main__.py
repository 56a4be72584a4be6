"""Runs every kfdist benchmark, prints the table, writes results.json and results.md.

    python -m benchmarks            # about 10 minutes on 2 cores
    python -m benchmarks --quick    # smaller inputs, no 15 s / 30 s polling runs: about 2 minutes

Every figure is measured in the same run as its baseline and reported as a
ratio, because shared machines are noisy; see each module for what is compared.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from benchmarks import end_to_end, input_pipeline, launcher, sharding, training
from benchmarks.common import machine, markdown_table, write_synthetic_mnist

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {
    "full": dict(shard_examples=20_000, train_epochs=5, launcher_jobs=5, polls=(15.0, 30.0),
                 e2e_epochs=10),
    "quick": dict(shard_examples=4_000, train_epochs=3, launcher_jobs=3, polls=(), e2e_epochs=3),
}

#: (measure, figure, how to read it, target test, target text)
TARGETS: List[Tuple[str, str, Callable[[Dict[str, Any]], Any], Callable[[Any], bool], str]] = [
    ("sharding", "examples/s vs naive writer", lambda m: m["speedup_vs_naive"], lambda v: v >= 2.0, ">= 2x"),
    ("sharding", "peak memory 10x / 1x input", lambda m: m["peak_memory_10x_over_1x"], lambda v: v <= 1.25, "flat (<= 1.25)"),
    ("input_pipeline", "steady state vs in-memory limit", lambda m: m["steady_vs_limit"], lambda v: v >= 0.8, ">= 0.8x"),
    ("input_pipeline", "first epoch vs naive", lambda m: m["first_epoch_vs_naive"], lambda v: v >= 1.5, ">= 1.5x"),
    ("training", "1-worker steps/s vs plain Keras", lambda m: m["one_worker_vs_plain"], lambda v: v >= 0.9, ">= 0.9x"),
    ("training", "input-bound fraction (1 worker)", lambda m: m["kfdist_1_worker"]["input_bound_fraction"], lambda v: v is not None and v <= 0.05, "<= 5 %"),
    ("launcher", "reaction to terminal condition (s)", lambda m: m["kfdist"]["reaction_seconds_max"], lambda v: v <= 1.0, "<= 1 s"),
    ("end_to_end", "kfdist run mnist vs plain script", lambda m: m["kfdist_over_plain"], lambda v: v <= 2.0, "<= 2x"),
]


def run(mode: str, only: List[str], log: Callable[[str], None],
        kubeconfig: Optional[str] = None) -> Dict[str, Any]:
    """Runs the selected measures at `mode`'s sizes; returns them by name.

    Args:
      mode: `full` or `quick` (`SIZES`).
      only: The measures to run.
      log: Receives progress lines.
      kubeconfig: The API server of the launcher measure; None: the test API server.
    """
    size = SIZES[mode]
    measures: Dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kfdist-bench-") as root:
        dataset = None
        if {"input_pipeline", "training"} & set(only):
            from kfdist.components.shard_dataset.runtime import shard

            raw = os.path.join(root, "raw")
            write_synthetic_mnist(raw, size["shard_examples"], seed=7)
            dataset = os.path.join(root, "dataset")
            shard(raw, dataset, source_format="mnist_idx", num_shards=8, log=lambda line: None)
        steps = [
            ("sharding", lambda: sharding.measure(size["shard_examples"])),
            ("input_pipeline", lambda: input_pipeline.measure(dataset)),
            ("training", lambda: training.measure(dataset, size["train_epochs"])),
            ("launcher", lambda: launcher.measure(size["launcher_jobs"], size["polls"],
                                                         kubeconfig)),
            ("end_to_end", lambda: end_to_end.measure(workers=2, epochs=size["e2e_epochs"])),
        ]
        for name, fn in steps:
            if name not in only:
                continue
            started = time.perf_counter()
            log(f"benchmark {name} ...")
            measures[name] = fn()
            log(f"benchmark {name}: {time.perf_counter() - started:.0f} s")
    return measures


def target_rows(measures: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Each target with its measured value and whether it is met."""
    rows = []
    for measure, figure, read, ok, text in TARGETS:
        if measure not in measures:
            continue
        value = read(measures[measure])
        rows.append({"measure": measure, "figure": figure, "value": value, "target": text,
                     "met": bool(ok(value))})
    return rows


def report_markdown(result: Dict[str, Any]) -> str:
    """results.md: machine, date, command, targets, then the main figures."""
    m = result["machine"]
    lines = [f"# kfdist benchmarks ({result['mode']})", "",
             f"- date: {result['date']}", f"- command: `{result['command']}`",
             f"- machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB, "
             f"Python {m['python']}", ""]
    lines.append(markdown_table(["measure", "figure", "value", "target", "met"], [
        [r["measure"], r["figure"], r["value"], r["target"], "yes" if r["met"] else "**no**"]
        for r in result["targets"]]))
    lines += ["", "Raw figures (baselines beside kfdist) are in `results.json`."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (about 2 minutes)")
    parser.add_argument("--only", default=",".join(name for name in
                                                    ("sharding", "input_pipeline", "training",
                                                     "launcher", "end_to_end")),
                        help="comma-separated measures to run")
    parser.add_argument("--out-dir", default=HERE, help="where results.json and results.md go")
    parser.add_argument("--kubeconfig", default=None,
                        help="API server of the launcher measure (no training operator may "
                             "watch its `default` namespace); default: the tests' API server, "
                             "started as a program")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    started = time.perf_counter()
    measures = run(mode, only, lambda line: print(line, file=sys.stderr, flush=True),
                   args.kubeconfig)
    result = {"mode": mode, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "command": "python -m benchmarks" + (" --quick" if args.quick else "")
                         + (f" --only {args.only}" if args.only != parser.get_default("only") else ""),
              "machine": machine(), "seconds": round(time.perf_counter() - started),
              "measures": measures}
    result["targets"] = target_rows(measures)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
        json.dump(result, f, indent=2)
    text = report_markdown(result)
    with open(os.path.join(args.out_dir, "results.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
