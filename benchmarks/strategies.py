"""Every distribution strategy on the same data, model and epochs, side by side.

    python -m benchmarks.strategies [--epochs 5] [--out benchmarks/strategies.json]

Runs `train_distributed` on the local backend for `mirrored` (1 worker),
`multi_worker_mirrored` (2 workers), `parameter_server` (chief + 1 PS +
2 workers) and `horovod` (2 ranks), each on the bundled digits sharded into 4
files, then evaluates each model on the held-out split. Prints one row per
strategy (job wall time, time in `fit`, examples/s, input-bound fraction,
held-out accuracy) and the ratios to `mirrored`, and writes them as JSON.
The numbers describe this machine: replicas share its cores, so more
replicas add coordination without adding compute.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from typing import Dict, List

from kfdist.components.common import legacy_keras  # noqa: F401  (tf-keras, before TensorFlow loads)
from kfdist.train_cmd import sample_dataset

STRATEGY_RUNS: Dict[str, dict] = {
    "mirrored": dict(workers=1),
    "multi_worker_mirrored": dict(workers=2),
    "parameter_server": dict(workers=2, ps=1),
    "horovod": dict(workers=2, restart_policy="OnFailure"),
}


def measure(epochs: int, batch_size: int) -> List[dict]:
    """Trains with every strategy; returns one row of measurements per strategy."""
    from kfdist.components.evaluate_model.runtime import evaluate
    from kfdist.components.train_distributed import runtime

    rows = []
    with tempfile.TemporaryDirectory(prefix="kfdist-bench-strategies-") as root:
        dataset = sample_dataset(root)
        for strategy, settings in STRATEGY_RUNS.items():
            model_dir = os.path.join(root, strategy)
            started = time.perf_counter()
            report = runtime.train(dataset, model_dir, strategy=strategy, epochs=epochs,
                                   batch_size_per_replica=batch_size, log=lambda line: None,
                                   **settings)
            wall = time.perf_counter() - started
            held_out = evaluate(model_dir, dataset, log=lambda line: None)
            rows.append({"strategy": strategy, **settings, "job_seconds": round(wall, 2),
                         "fit_seconds": round(report.wall_seconds, 2),
                         "examples_per_second": round(report.examples_per_second),
                         "input_bound_fraction": report.input_bound_fraction,
                         "eval_accuracy": round(held_out.accuracy, 4)})
            shutil.rmtree(model_dir, ignore_errors=True)
    base = rows[0]
    for row in rows:
        row["fit_time_vs_mirrored"] = round(row["fit_seconds"] / base["fit_seconds"], 2)
        row["examples_per_second_vs_mirrored"] = round(
            row["examples_per_second"] / base["examples_per_second"], 2)
    return rows


def table(rows: List[dict]) -> str:
    """The rows as a Markdown table."""
    head = ("| strategy | replicas | job s | fit s | examples/s | vs mirrored | input-bound | "
            "held-out accuracy |\n|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        replicas = f"{r['workers']} worker(s)" + (f" + {r['ps']} PS + chief" if r.get("ps") else "")
        fraction = "n/a" if r["input_bound_fraction"] is None else f"{r['input_bound_fraction']:.1%}"
        lines.append(f"| {r['strategy']} | {replicas} | {r['job_seconds']} | {r['fit_seconds']} | "
                     f"{r['examples_per_second']} | {r['examples_per_second_vs_mirrored']}x | "
                     f"{fraction} | {r['eval_accuracy']:.3f} |")
    return head + "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    rows = measure(args.epochs, args.batch_size)
    print(table(rows))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                       "date": time.strftime("%Y-%m-%d"), "epochs": args.epochs,
                       "batch_size_per_replica": args.batch_size, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
