"""Runs a shipped pipeline on this machine with kfp.local and summarises it.

Each step runs as a subprocess of this Python (kfp.local's SubprocessRunner);
the training step starts its replicas as further processes with TF_CONFIG.
The console shows a line per step (`run_console`); every line goes to
`<output_dir>/logs/<step>.log`. The shard step's output is cached under the
pipeline root and reused by a later run with the same data and parameters.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from typing import Any, Dict, Mapping, Optional, Tuple

from kfdist.components.common.errors import InvalidInputError, TrainingFailedError

SUMMARY_FILE = "summary.json"
LOGS_DIR = "logs"
PIPELINE_ROOT_DIR = "pipeline_root"
#: The export step's task and its record output, read back for the summary.
EXPORT_TASK, EXPORT_RECORD = "export-saved-model", "export"


@dataclasses.dataclass(frozen=True)
class MnistRunOptions:
    """Parameters of a local `mnist` run (see the pipeline for their meaning).

    Attributes:
      training: The training step's parameters (`job.step_params`) to set;
        the others take their defaults. The pipeline runs locally; with a
        cluster backend (`tfjob`, `mpijob`, `trainjob`) its training step
        launches the job on the cluster the kubeconfig names.
    """

    output_dir: str
    source_uri: Optional[str] = None
    export_base: Optional[str] = None
    training: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    num_shards: int = 4
    eval_fraction: float = 0.2
    accuracy_threshold: float = 0.9
    serving_model_name: str = "mnist"
    cache: bool = True
    verbose: bool = False

    @functools.cached_property
    def train(self) -> Dict[str, Any]:
        """Every training parameter the pipeline takes, unset ones resolved (workers, ps, ...)."""
        from kfdist.components.train_distributed.job import step_params, strategy_rules

        values = step_params.complete(self.training)
        values.update(strategy_rules.strategy_defaults(values["strategy"], values["ps"],
                                               values["restart_policy"], values["workers"] or None))
        return {name: values[name] for name in pipeline_training_params()}


def pipeline_training_params() -> Tuple[str, ...]:
    """The training-step parameters the `mnist` pipeline exposes, in its order."""
    import inspect

    from kfdist.components.train_distributed.job import step_params
    from kfdist.pipelines.mnist import mnist_pipeline

    names = inspect.signature(mnist_pipeline.pipeline_func).parameters
    return tuple(n for n in names if n in step_params.PARAMS_BY_NAME)


def validate_mnist_options(opts: MnistRunOptions) -> None:
    """Checks every option before anything is written.

    Raises:
      InvalidInputError: Naming the first bad value and what would be valid.
    """
    from kfdist.components.common import storage
    from kfdist.components.evaluate_model.runtime import validate_evaluation_args
    from kfdist.components.export_saved_model.runtime import validate_export_args
    from kfdist.components.shard_dataset import readers
    from kfdist.components.shard_dataset.options import validate_options
    from kfdist.components.shard_dataset.runtime import DEFAULT_SHUFFLE_BUFFER
    from kfdist.components.shard_dataset.source import ReaderOptions
    from kfdist.components.train_distributed.runtime import validate_training_args

    validate_options(
        source_format="mnist_idx", label_column="label", num_shards=opts.num_shards,
        num_eval_shards=None, eval_fraction=opts.eval_fraction, seed=opts.train["seed"],
        compression=None, image_shape=None, shuffle_buffer_size=DEFAULT_SHUFFLE_BUFFER)
    if opts.source_uri is not None:
        if storage.is_gcs(opts.source_uri):
            if not storage.list_uris(opts.source_uri):
                raise InvalidInputError(f"--data {opts.source_uri!r}: nothing exists there")
        else:  # headers, counts and gzip integrity, read before anything is written
            readers.open_source(opts.source_uri, "mnist_idx", ReaderOptions())
    validate_training_args(**opts.train)
    validate_evaluation_args(accuracy_threshold=opts.accuracy_threshold)
    validate_export_args(serving_model_name=opts.serving_model_name)


def run_mnist(opts: MnistRunOptions) -> Dict[str, Any]:
    """Runs the `mnist` pipeline locally and writes `<output_dir>/summary.json`.

    Without `source_uri`, the bundled sample digits are written to
    `<output_dir>/data/mnist` first (unchanged files when already there, so the
    shard step's cached output is reused). Without `export_base`, models are
    exported under `<output_dir>/serving`.

    Returns:
      The summary written to `summary.json`.

    Raises:
      InvalidInputError: If an option is invalid (nothing is written then).
      TrainingFailedError: If a pipeline step fails (its log's last lines in the message).
    """
    validate_mnist_options(opts)
    from kfp import local

    from kfdist.components.common import storage
    from kfdist.pipelines.mnist import mnist_pipeline
    from kfdist.run_console import RunConsole
    from kfdist.sample_data import write_mnist_sample

    start = time.monotonic()
    output_dir = os.path.abspath(opts.output_dir)
    source_uri = opts.source_uri
    if source_uri is None:
        source_uri = os.path.join(output_dir, "data", "mnist")
        write_mnist_sample(source_uri)
    export_base = opts.export_base or os.path.join(output_dir, "serving")
    local.init(runner=local.SubprocessRunner(use_venv=False),
               pipeline_root=os.path.join(output_dir, PIPELINE_ROOT_DIR), raise_on_error=True,
               enable_caching=opts.cache)
    console = RunConsole(os.path.join(output_dir, LOGS_DIR), verbose=opts.verbose)
    print(_headline(opts, output_dir), flush=True)
    try:
        with console:
            task = mnist_pipeline(
                source_uri=source_uri, export_base=export_base, num_shards=opts.num_shards,
                eval_fraction=opts.eval_fraction, accuracy_threshold=opts.accuracy_threshold,
                serving_model_name=opts.serving_model_name,
                source_version=storage.content_version(source_uri), **opts.train)
    except RuntimeError as err:
        from kfdist.run_console import strip_colours

        err = strip_colours(str(err))
        step = console.failed_step or "a step"
        where = (f"; its whole log: {console.log_path(console.failed_step)}"
                 if console.failed_step else f"; logs: {console.logs_dir}")
        raise TrainingFailedError(f"pipeline 'mnist' failed in {step}: {err}{where}") from None
    summary = _summarise(task.outputs, opts, source_uri, export_base, output_dir,
                         time.monotonic() - start)
    with open(os.path.join(output_dir, SUMMARY_FILE), "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
    return summary


def _headline(opts: MnistRunOptions, output_dir: str) -> str:
    train = opts.train
    replicas = f"{train['workers']} worker(s)" + (f", {train['ps']} ps" if train["ps"] else "")
    return (f"kfdist run mnist: {train['strategy']}, {replicas}, {train['epochs']} epochs of "
            f"{train['model_name']} -> {output_dir}")


def _export_record(outputs) -> Dict[str, Any]:
    """The export step's record, read from its output beside the training step's.

    The export task runs under `dsl.If(blessed)`, so it is no pipeline output;
    kfp.local writes every task's outputs under `<pipeline_root>/<run>/<task>/`.
    """
    run_dir = os.path.dirname(os.path.dirname(outputs["training_metrics"].path))
    try:
        with open(os.path.join(run_dir, EXPORT_TASK, EXPORT_RECORD)) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"exported": False, "path": None, "version": None,
                "reason": "the export step was skipped: the model is not blessed"}


def _summarise(outputs, opts: MnistRunOptions, source_uri: str, export_base: str,
               output_dir: str, wall_seconds: float) -> Dict[str, Any]:
    train_metrics = dict(outputs["training_metrics"].metadata)
    train = opts.train
    return {
        "pipeline": "mnist",
        "data": source_uri,
        "output_dir": output_dir,
        "logs_dir": os.path.join(output_dir, LOGS_DIR),
        "train": {
            **{k: train[k] for k in ("backend", "strategy", "workers", "ps", "restart_policy",
                                     "model_name", "epochs")},
            "final_loss": train_metrics.get("final_loss"),
            "final_accuracy": train_metrics.get("final_accuracy"),
            "examples_per_second": train_metrics.get("examples_per_second"),
            "seconds": train_metrics.get("training_seconds"),
            "input_bound_fraction": train_metrics.get("input_bound_fraction"),
            "restarts": train_metrics.get("restarts"),
        },
        "eval": {"accuracy": outputs["evaluation_metrics"].metadata["accuracy"],
                 "threshold": opts.accuracy_threshold},
        "blessed": bool(outputs["blessed"]),
        "export": {"base": export_base, **_export_record(outputs)},
        "wall_seconds": round(wall_seconds, 2),
    }


def format_summary(summary: Dict[str, Any]) -> str:
    """A few lines a person reads at the end of `kfdist run`."""
    evaluation, export = summary["eval"], summary["export"]
    verdict = "blessed" if summary["blessed"] else "not blessed"
    lines = [f"held-out accuracy {evaluation['accuracy']:.4f} (threshold "
             f"{evaluation['threshold']}): {verdict}"]
    lines.append(f"model exported to {export['path']}" if export.get("exported")
                 else f"not exported: {export.get('reason')}")
    lines.append(f"done in {summary['wall_seconds']:.1f}s; summary: "
                 f"{os.path.join(summary['output_dir'], SUMMARY_FILE)}; every step's log: "
                 f"{summary['logs_dir']}/")
    return "\n".join(lines)
