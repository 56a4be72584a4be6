"""Distributed overhead: kfdist's local backend against a plain script of the same strategy.

The plain script is the program the seeds run by hand: every process reads `TF_CONFIG`, builds
the strategy, reads the same shards of the same kfdist dataset with `tf.data`, and trains the
same model (`mnist_mlp`) with the same batch per replica and Adam:

* `multi_worker_mirrored`, 2 workers: `fit` with the eval split as `validation_data`;
* `parameter_server`, a chief, 1 PS and 2 workers: the chief's `fit` over a `DatasetCreator`,
  the PS and the workers as `tf.distribute.Server`s; the chief scores the eval split after every
  epoch (there is no validation in a PS `fit`).

The benchmark starts the plain processes itself with the Training Operator's TF_CONFIG layout on
localhost, as `kfdist launch` would. kfdist's side is the training step on its local backend.
Reported per strategy: steady-state examples and steps per second (the epochs after the first,
training only), the seconds to a held-out accuracy target, and kfdist's ratio to the plain
script.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

from benchmarks.common import CHILD_ENV, REPO_ROOT, epoch_wall_seconds
from benchmarks.time_to_accuracy import time_to_target

BATCH = 64
#: The strategies compared, with their layouts.
LAYOUTS = {"multi_worker_mirrored": {"worker": 2}, "parameter_server": {"chief": 1, "worker": 2,
                                                                        "ps": 1}}
PLAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plain_distributed.py")


def _run_plain(strategy: str, dataset: str, epochs: int, out: str) -> Dict[str, Any]:
    """Starts every process of the layout with its TF_CONFIG; returns the leader's figures."""
    from kfdist.components.train_distributed.local.ports import free_ports

    layout = LAYOUTS[strategy]
    ports = iter(free_ports(sum(layout.values())))
    cluster = {kind: [f"localhost:{next(ports)}" for _ in range(n)] for kind, n in layout.items()}
    leader = ("chief", 0) if "chief" in layout else ("worker", 0)
    env = dict(os.environ, **CHILD_ENV, PYTHONPATH=REPO_ROOT)
    processes, result_file = [], os.path.join(out, "plain.json")
    started = time.perf_counter()
    for kind, addresses in cluster.items():
        for index in range(len(addresses)):
            config = {"cluster": cluster, "task": {"type": kind, "index": index}}
            processes.append(((kind, index), subprocess.Popen(
                [sys.executable, PLAIN, strategy, dataset, str(epochs), str(BATCH), result_file],
                env=dict(env, TF_CONFIG=json.dumps(config)), stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True)))
    try:
        chief = dict(processes)[leader]
        _, err = chief.communicate(timeout=3600)
        if chief.returncode != 0:
            raise RuntimeError(f"plain {strategy} failed:\n{err[-3000:]}")
        for task, process in processes:
            if task[0] != "ps" and strategy != "parameter_server":
                process.wait(timeout=300)
    finally:
        for _, process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    job = time.perf_counter() - started
    with open(result_file) as f:
        figures = json.load(f)
    figures["job_seconds"] = round(job, 2)
    return figures


def _run_kfdist(strategy: str, dataset: str, epochs: int, out: str) -> Dict[str, Any]:
    from kfdist.components.train_distributed import runtime

    layout = LAYOUTS[strategy]
    started = time.perf_counter()
    runtime.train(dataset, out, strategy=strategy, workers=layout["worker"],
                  ps=layout.get("ps", 0), epochs=epochs, batch_size_per_replica=BATCH,
                  log=lambda line: None)
    job = time.perf_counter() - started
    with open(os.path.join(out, "history.json")) as f:
        history = json.load(f)["epochs"]
    return {"epochs": [{"seconds": e["seconds"], "val_accuracy": e.get("val_accuracy", 0.0),
                        "validation_seconds": e.get("validation_seconds", 0.0)} for e in history],
            "job_seconds": round(job, 2)}


def _figures(run: Dict[str, Any], steps: int, examples_per_step: int,
             target: float) -> Dict[str, Any]:
    epochs: List[Dict[str, float]] = run["epochs"]
    steady = [e["seconds"] for e in epochs[1:]] or [epochs[0]["seconds"]]
    steps_per_second = steps * len(steady) / sum(steady)
    return {"job_seconds": run["job_seconds"],
            "steps_per_second": round(steps_per_second, 2),
            "examples_per_second": round(steps_per_second * examples_per_step),
            "val_accuracy": [round(e["val_accuracy"], 4) for e in epochs],
            "epoch_wall_seconds": [round(s, 2) for s in epoch_wall_seconds(epochs)],
            **time_to_target(epochs, run["job_seconds"], target)}


def measure(data: str, train_examples: int, epochs: int, target: float) -> Dict[str, Any]:
    """Both sides of each strategy on `data` (MNIST-like files, sharded here in 4 files)."""
    from kfdist.components.shard_dataset.runtime import shard

    result: Dict[str, Any] = {"train_examples": train_examples, "epochs": epochs,
                              "target_accuracy": target, "batch_per_replica": BATCH}
    with tempfile.TemporaryDirectory(prefix="kfdist-bench-dist-") as root:
        dataset = os.path.join(root, "dataset")
        shard(data, dataset, num_shards=4, log=lambda line: None)
        for strategy, layout in LAYOUTS.items():
            # Both sides' epoch is one pass over the train split, as the training step counts
            # it: steps of a batch per worker (all-reduce), or of one worker's batch (PS).
            per_step = BATCH * (layout["worker"] if strategy == "multi_worker_mirrored" else 1)
            steps = train_examples // per_step
            row: Dict[str, Any] = {"steps_per_epoch": steps, "examples_per_step": per_step}
            for side, run in (("kfdist", _run_kfdist), ("plain", _run_plain)):
                out = os.path.join(root, f"{strategy}-{side}")
                os.makedirs(out)
                row[side] = _figures(run(strategy, dataset, epochs, out), steps, per_step,
                                     target)
            row["kfdist_steps_per_second_over_plain"] = round(
                row["kfdist"]["steps_per_second"] / row["plain"]["steps_per_second"], 2)
            result[strategy] = row
    return result
