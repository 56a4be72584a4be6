"""What `kfdist run` prints and records: its headline and `summary.json`."""

from __future__ import annotations

import json
import os
from typing import Any, Dict

SUMMARY_FILE = "summary.json"
LOGS_DIR = "logs"
#: The export step's task and its record output, read back for the summary.
EXPORT_TASK, EXPORT_RECORD = "export-saved-model", "export"


def headline(opts, output_dir: str) -> str:
    """The line `kfdist run` starts with: what runs, on what, where."""
    train = opts.train
    if opts.runs_a_program:
        import shlex

        return (f"kfdist run program: {train['framework']}, {train['workers']} worker(s)"
                + (f", {train['ps']} ps" if train["ps"] else "")
                + f" running `{shlex.join(train['command'])}` -> {output_dir}")
    replicas = f"{train['workers']} worker(s)" + (f", {train['ps']} ps" if train["ps"] else "")
    model = train["model_name"] or "the data's default model"
    return (f"kfdist run {opts.pipeline}: {train['strategy']}, {replicas}, {train['epochs']} "
            f"epochs of {model} -> {output_dir}")


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


def check_outputs(outputs) -> None:
    """Fails unless every output the pipeline declares was written: a runner's SUCCESS alone
    is not trusted (DockerRunner reports one for a container that vanished without outputs).

    Raises:
      TrainingFailedError: Naming the missing output.
    """
    from kfdist.components.common.errors import TrainingFailedError

    for name, value in outputs.items():
        metadata = getattr(value, "metadata", None)
        path = getattr(value, "path", None)
        if metadata is None and path is None:
            continue  # a parameter (e.g. `blessed`): kfp.local read it from the executor output
        if type(value).__name__ == "Metrics":
            written = bool(metadata)
        else:
            written = bool(path) and os.path.exists(path)
        if not written:
            raise TrainingFailedError(
                f"the pipeline's output {name!r} was not written, although the runner reported "
                f"its step as succeeded (expected at {path}); see the step's log")


def summarise(outputs, opts, source_uri: str, export_base: str,
               output_dir: str, wall_seconds: float) -> Dict[str, Any]:
    """`summary.json` of a finished run: data, training, evaluation, export, wall time.

    Args:
      outputs: The pipeline task's outputs (kfp.local).
      opts: The run's `RunOptions`.
      source_uri: The data the run read.
      export_base: Where models are exported.
      output_dir: The run directory.
      wall_seconds: The run's wall time.
    """
    from kfdist.components.evaluate_model.slices import from_metric_values

    train_metrics = dict(outputs["training_metrics"].metadata)
    train = opts.train
    if opts.runs_a_program:
        trained = {**{k: train[k] for k in ("framework", "command", "workers", "ps",
                                            "restart_policy")},
                   "seconds": train_metrics.get("training_seconds"),
                   "restarts": train_metrics.get("restarts")}
    else:
        trained = {
            **{k: train[k] for k in ("backend", "strategy", "workers", "ps", "restart_policy",
                                     "model_name", "epochs")},
            "final_loss": train_metrics.get("final_loss"),
            "final_accuracy": train_metrics.get("final_accuracy"),
            "final_val_accuracy": train_metrics.get("final_val_accuracy"),
            "examples_per_second": train_metrics.get("examples_per_second"),
            "seconds": train_metrics.get("training_seconds"),
            "input_bound_fraction": train_metrics.get("input_bound_fraction"),
            "restarts": train_metrics.get("restarts"),
        }
    return {
        "pipeline": opts.pipeline,
        "data": source_uri,
        "output_dir": output_dir,
        "logs_dir": os.path.join(output_dir, LOGS_DIR),
        "train": trained,
        "eval": {"accuracy": outputs["evaluation_metrics"].metadata["accuracy"],
                 "threshold": opts.accuracy_threshold,
                 "slices": from_metric_values(outputs["evaluation_metrics"].metadata)},
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
    if evaluation.get("slices"):
        key, worst = min(evaluation["slices"].items(),
                         key=lambda item: (item[1]["accuracy"], -item[1]["examples"]))
        lines.append(f"lowest-accuracy slice: {key} {worst['accuracy']:.4f} "
                     f"({worst['examples']:.0f} examples; every slice in the evaluation's report)")
    lines.append(f"model exported to {export['path']}" if export.get("exported")
                 else f"not exported: {export.get('reason')}")
    lines.append(f"done in {summary['wall_seconds']:.1f}s; summary: "
                 f"{os.path.join(summary['output_dir'], SUMMARY_FILE)}; every step's log: "
                 f"{summary['logs_dir']}/")
    return "\n".join(lines)
