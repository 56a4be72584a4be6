"""`kfdist train`: the training step alone, on this machine or a cluster, from the shell.

    kfdist train --strategy parameter_server --workers 2 --ps 1 --output runs/ps
    kfdist train --strategy horovod --workers 2 --dataset DATASET_DIR --output runs/hvd

Without `--dataset`, the bundled sample digits are written and sharded into
`OUTPUT/dataset` first. The model artifact goes to `OUTPUT/model` (a model
directory left by an interrupted run is resumed from its backup), and the
held-out evaluation of the trained model to `OUTPUT/train-summary.json`,
which is also printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

from kfdist.components.common.errors import InvalidInputError

SUMMARY_FILE = "train-summary.json"


def add_train_parser(sub) -> None:
    """Adds the `train` sub-command to the `kfdist` parser."""
    from kfdist.step_flags import add_step_flags

    p = sub.add_parser("train", help="run the training step alone and evaluate its model",
                       description=__doc__.split("\n")[0])
    p.add_argument("--output", required=True, help="run directory: model/, dataset/, summary")
    p.add_argument("--dataset", default=None,
                   help="kfdist dataset directory (default: shard the bundled sample digits)")
    add_step_flags(p)
    p.set_defaults(func=run_train_command)


def run_train_command(args: argparse.Namespace) -> int:
    """Validates, prepares the dataset if needed, trains, evaluates; prints the summary."""
    from kfdist.components.train_distributed import runtime
    from kfdist.step_flags import step_values

    kwargs = step_values(args)
    runtime.validate_training_args(**kwargs)
    from kfdist.out_dirs import check_dir_path

    check_dir_path(args.output, "--output")
    if args.dataset is not None and not os.path.isfile(os.path.join(args.dataset, "metadata.json")):
        raise InvalidInputError(f"--dataset {args.dataset!r} is not a kfdist dataset (no "
                                "metadata.json); write one with the shard_dataset step, or "
                                "leave --dataset out to use the bundled sample")
    output = os.path.abspath(args.output)
    dataset_dir = args.dataset or sample_dataset(output, kwargs["seed"])
    report = runtime.train(dataset_dir, os.path.join(output, "model"), **kwargs)
    from kfdist.components.evaluate_model.runtime import evaluate

    result = evaluate(os.path.join(output, "model"), dataset_dir, log=lambda line: None)
    summary = {"training": dataclasses.asdict(report),
               "eval": {**({"rmse": result.rmse, "mae": result.mae, "r2": result.r2}
                           if result.task == "regression" else {"accuracy": result.accuracy}),
                        "loss": result.loss, "examples": result.num_examples},
               "dataset": dataset_dir, "model": os.path.join(output, "model")}
    summary["training"].pop("replicas")
    summary["replica_weights_sha256"] = {r.task: r.weights_sha256 for r in report.replicas}
    with open(os.path.join(output, SUMMARY_FILE), "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


def sample_dataset(output: str, seed: int = 42) -> str:
    """The bundled digits, sharded into `output/dataset` in 4 train shards (reused when there).

    Args:
      output: Directory; the raw sample goes to `output/data/mnist`.
      seed: Shuffle and shard-assignment seed.

    Returns:
      The dataset directory.
    """
    dataset_dir = os.path.join(output, "dataset")
    if os.path.isfile(os.path.join(dataset_dir, "metadata.json")):
        return dataset_dir
    from kfdist.components.shard_dataset.runtime import shard
    from kfdist.sample_data import write_mnist_sample

    raw = os.path.join(output, "data", "mnist")
    write_mnist_sample(raw)
    shard(raw, dataset_dir, source_format="mnist_idx", num_shards=4, seed=seed,
          log=lambda line: None)
    return dataset_dir
