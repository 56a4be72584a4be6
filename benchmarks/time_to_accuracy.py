"""Time to a stated held-out accuracy, per distribution strategy, on MNIST-shaped data.

The data is `end_to_end`'s (the same generated `train-*`/`t10k-*` digits),
sharded once by `shard_dataset`. Each strategy of `strategies.STRATEGY_RUNS` then
trains `mnist_mlp` on the local backend (replica processes with the
TF_CONFIG the operators inject) for up to `epochs` epochs, batch 64 per
replica; the leader scores the whole eval split after every epoch
(`val_accuracy` in `history.json`).

Time to accuracy = start-up + the epochs (training and validation) up to the
first whose `val_accuracy` reaches the target. Start-up is the job's wall
time less every epoch's, so it holds process start, reading the dataset and
the final save.

When the same run also measured `end_to_end`, the `mirrored` row is read from
its training step instead of training again: the same data, strategy (one
worker), model and batch, sharded by the pipeline's own step; its start-up is
that step's wall time less all its epochs (a KFP step's, so a little more).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any, Dict, List, Optional

from benchmarks.common import epoch_wall_seconds
from benchmarks.strategies import STRATEGY_RUNS


def reaching_target(epochs: List[Dict[str, float]], startup: float,
                    target: float) -> Dict[str, Optional[float]]:
    """Epochs and seconds (start-up plus each epoch's steps and validation) until `val_accuracy`
    first reaches `target`; None for both if it never does."""
    spent = epoch_wall_seconds(epochs)
    for index, epoch in enumerate(epochs):
        if epoch.get("val_accuracy", 0.0) >= target:
            return {"epochs_to_target": index + 1,
                    "seconds_to_target": round(startup + sum(spent[:index + 1]), 2)}
    return {"epochs_to_target": None, "seconds_to_target": None}


def time_to_target(epochs: List[Dict[str, float]], job_seconds: float,
                   target: float) -> Dict[str, Optional[float]]:
    """Start-up (the job's time outside its epochs), and `reaching_target`."""
    startup = max(0.0, job_seconds - sum(epoch_wall_seconds(epochs)))
    return {"startup_seconds": round(startup, 2), **reaching_target(epochs, startup, target)}


def _row_of_end_to_end(run: Dict[str, Any], train_examples: int, epochs: int,
                       target: float) -> Dict[str, Any]:
    """The `mirrored` row from an `end_to_end` measure's training step (all its epochs ran)."""
    history = run["kfdist_train_history"]
    job = run["kfdist_steps"]["train-distributed"]
    spent = epoch_wall_seconds(history)
    # Its later epochs are no part of the first `epochs`: neither start-up nor time to target.
    row = time_to_target(history[:epochs], job - sum(spent[epochs:]), target)
    return {"strategy": "mirrored", "workers": 1, "job_seconds": job,
            "examples_per_second": round(train_examples * len(history) / sum(spent)),
            "val_accuracy": [round(e["val_accuracy"], 4) for e in history[:epochs]],
            "from_end_to_end": True, **row}


def measure(data: str, train_examples: int, epochs: int, target: float,
            end_to_end: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Trains with every strategy on `data` (`end_to_end.write_mnist_like`, `train_examples`
    digits); returns, per strategy, the time to `target` and the curve. With the
    `end_to_end` measure of the same data, its training step gives the `mirrored` row."""
    from kfdist.components.shard_dataset.runtime import shard
    from kfdist.components.train_distributed import runtime

    rows = []
    with tempfile.TemporaryDirectory(prefix="kfdist-bench-tta-") as root:
        dataset = os.path.join(root, "dataset")
        shard(data, dataset, num_shards=4, log=lambda line: None)
        for strategy, settings in STRATEGY_RUNS.items():
            if strategy == "mirrored" and end_to_end is not None:
                rows.append(_row_of_end_to_end(end_to_end, train_examples, epochs, target))
                continue
            model_dir = os.path.join(root, strategy)
            started = time.perf_counter()
            report = runtime.train(dataset, model_dir, strategy=strategy, epochs=epochs,
                                   batch_size_per_replica=64, log=lambda line: None, **settings)
            job = time.perf_counter() - started
            with open(os.path.join(model_dir, "history.json")) as f:
                history = json.load(f)["epochs"]
            rows.append({"strategy": strategy, **settings, "job_seconds": round(job, 2),
                         "examples_per_second": round(report.examples_per_second),
                         "val_accuracy": [round(e["val_accuracy"], 4) for e in history],
                         **time_to_target(history, job, target)})
    return {"train_examples": train_examples, "max_epochs": epochs, "target_accuracy": target,
            "strategies": rows}
