"""What `kfdist run` prints and records: its headline and `summary.json`."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, Dict, List, Optional

from kfdist import regression_summary

SUMMARY_FILE = "summary.json"
LOGS_DIR = "logs"
#: The export step's task and its record output, read back for the summary.
EXPORT_TASK, EXPORT_RECORD = "export-saved-model", "export"
#: The evaluation step's task and its verdict output (the blessing and its reason).
EVALUATE_TASK, BLESSING_RECORD = "evaluate-model", "blessing"
#: The shard step's task and its comparison of the data with the reference (`data_check`).
SHARD_TASK, VALIDATION_RECORD = "shard-dataset", os.path.join("dataset", "validation.json")
#: The evaluation step's HTML report output, and where a run puts it in its output directory.
REPORT_OUTPUT, REPORT_FILE = "report", "report.html"
#: Where a run puts the data check's HTML page (`run_record.publish_data_report`).
DATA_REPORT_FILE = "data_report.html"
#: The training step's tasks and their model output (kfdist's models, a user's program).
TRAIN_TASKS, MODEL_OUTPUT = ("train-distributed", "train-program"), "model"


def headline(opts, output_dir: str) -> str:
    """The line `kfdist run` starts with: what runs, on what, where."""
    from kfdist.components.common.wording import counted

    train = opts.train
    replicas = counted(train["workers"], "worker") + (f", {train['ps']} ps" if train["ps"] else "")
    if opts.runs_a_program:
        import shlex

        return (f"kfdist run program: {train['framework']}, {replicas}"
                f" running `{shlex.join(train['command'])}` -> {output_dir}")
    model = train["model_name"] or "the data's default model"
    return (f"kfdist run {opts.pipeline}: {train['strategy']}, {replicas}, "
            f"{counted(train['epochs'], 'epoch')} of {model} -> {output_dir}")


def _task_record(outputs, task: str, record: str) -> Dict[str, Any]:
    """A task's JSON output, read from beside the training step's (kfp.local writes every
    task's outputs under `<pipeline_root>/<run>/<task>/`); empty when it wrote none."""
    try:
        with open(os.path.join(_run_dir(outputs), task, record)) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def _run_dir(outputs) -> str:
    """`<pipeline_root>/<run>`, where kfp.local wrote the run's tasks' outputs."""
    return os.path.dirname(os.path.dirname(outputs["training_metrics"].path))


def forget_earlier_run(output_dir: str) -> None:
    """Removes an earlier run's `summary.json` and reports from `output_dir`, so that a run
    that ends early leaves none that could be taken for its own."""
    for name in (SUMMARY_FILE, REPORT_FILE, DATA_REPORT_FILE):
        path = os.path.join(output_dir, name)
        if os.path.isfile(path):
            os.remove(path)


def publish_report(outputs, output_dir: str) -> Optional[str]:
    """Copies the evaluation's HTML report to `<output_dir>/report.html`; returns its path
    (None if the evaluation wrote none)."""
    source = os.path.join(_run_dir(outputs), EVALUATE_TASK, REPORT_OUTPUT)
    if not os.path.isfile(source):
        return None
    target = os.path.join(output_dir, REPORT_FILE)
    shutil.copyfile(source, target)
    return target


def _training_advice(outputs, trained: Dict[str, Any], held_out: float) -> Dict[str, Any]:
    """Which epoch the model holds and why, and what its curves say (`fit_gap`)."""
    from kfdist.components.common.kept_epoch import KeptEpoch
    from kfdist.components.common.model_artifact import read_history
    from kfdist.components.evaluate_model.fit_gap import fit_advice

    kept = KeptEpoch.from_metrics(outputs["training_metrics"].metadata)
    history = read_history(os.path.join(_run_dir(outputs), TRAIN_TASKS[0], MODEL_OUTPUT))
    advice = fit_advice(history, trained.get("final_accuracy"), held_out, kept)
    return {**(kept.summary() if kept is not None else {}),
            "fit_advice": None if advice is None else {"text": advice.text,
                                                       "warning": advice.warning}}


def _trained_model_name(outputs) -> Optional[str]:
    """The model kfdist trained, as its training report names it (None for a program's)."""
    from kfdist.components.common.model_artifact import read_training_report

    for task in TRAIN_TASKS:
        report = read_training_report(os.path.join(_run_dir(outputs), task, MODEL_OUTPUT))
        if report is not None:
            return report.model_name
    return None


def _label(outputs) -> Optional[Dict[str, Any]]:
    """The label's classes and their examples per split, and warnings
    (`class_counts.label_record`), from the metadata of the dataset the model was trained on."""
    from kfdist.components.common.class_counts import label_record
    from kfdist.components.common.dataset_spec import DatasetMetadata
    from kfdist.components.common.model_artifact import DATASET_METADATA_FILE

    for task in TRAIN_TASKS:
        path = os.path.join(_run_dir(outputs), task, MODEL_OUTPUT, DATASET_METADATA_FILE)
        if os.path.isfile(path):
            with open(path) as f:
                return label_record(DatasetMetadata.from_json(f.read()))
    return None


def _export_record(outputs, blessing: Dict[str, Any]) -> Dict[str, Any]:
    """The export step's record; the export task runs under `dsl.If(blessed)`, so it is no
    pipeline output, and a skipped one says why the model is not blessed."""
    why = f" ({blessing['reason']})" if blessing.get("reason") else ""
    return _task_record(outputs, EXPORT_TASK, EXPORT_RECORD) or {
        "exported": False, "path": None, "version": None,
        "reason": f"the export step was skipped: the model is not blessed{why}"}


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
               output_dir: str, wall_seconds: float, *, steps: Optional[Dict[str, str]] = None,
               report: Optional[str] = None, data_report: Optional[str] = None
               ) -> Dict[str, Any]:
    """`summary.json` of a finished run: its id, the model's name, every step's outcome, data,
    its label's classes, training, evaluation, the reports, export and wall time (a failed
    run's: `run_record.failed_summary`).

    Args:
      outputs: The pipeline task's outputs (kfp.local).
      opts: The run's `RunOptions`.
      source_uri: The data the run read.
      export_base: Where models are exported.
      output_dir: The run directory.
      wall_seconds: The run's wall time.
      steps: What became of each step (`run_console.RunConsole.outcomes`).
      report: The evaluation's HTML report (`publish_report`).
      data_report: The data check's HTML page (`run_record.publish_data_report`).
    """
    from kfdist.components.evaluate_model.slices import from_metric_values
    from kfdist.run_record import SUCCEEDED

    blessing = _task_record(outputs, EVALUATE_TASK, BLESSING_RECORD)
    served = {k[len("served_"):]: v for k, v in blessing.items() if k.startswith("served_")}
    if "accuracy_change" in blessing:
        served.update(accuracy_change=blessing["accuracy_change"],
                      min_improvement=blessing.get("min_improvement"))
    train_metrics = dict(outputs["training_metrics"].metadata)
    evaluated = outputs["evaluation_metrics"].metadata
    regression = regression_summary.is_regression(evaluated)
    train = opts.train
    if opts.runs_a_program:
        trained = {**{k: train[k] for k in ("framework", "command", "workers", "ps",
                                            "restart_policy")},
                   "job_seconds": train_metrics.get("training_seconds"),
                   "restarts": train_metrics.get("restarts")}
    else:
        trained = {
            **{k: train[k] for k in ("backend", "strategy", "workers", "ps", "restart_policy",
                                     "epochs")},
            "model_name": train["model_name"] or _trained_model_name(outputs),
            "final_loss": train_metrics.get("final_loss"),
            "final_accuracy": train_metrics.get("final_accuracy"),
            "final_val_accuracy": train_metrics.get("final_val_accuracy"),
            **{k: train_metrics[k] for k in ("final_rmse", "final_val_rmse") if k in train_metrics},
            "examples_per_second": train_metrics.get("examples_per_second"),
            "fit_seconds": train_metrics.get("training_seconds"),
            "input_bound_fraction": train_metrics.get("input_bound_fraction"),
            "restarts": train_metrics.get("restarts"),
        }
        trained.update(_training_advice(outputs, trained,
                                        None if regression else evaluated["accuracy"]))
    return {
        "status": SUCCEEDED,
        "failure": None,
        "run_id": os.path.basename(_run_dir(outputs)),
        "pipeline": opts.pipeline,
        "model_name": opts.serving_name,
        "steps": dict(steps or {}),
        "report": report,
        "data_report": data_report,
        "data": source_uri,
        "data_validation": _task_record(outputs, SHARD_TASK, VALIDATION_RECORD) or None,
        "label": _label(outputs),
        "output_dir": output_dir,
        "logs_dir": os.path.join(output_dir, LOGS_DIR),
        "train": trained,
        "eval": regression_summary.eval_record(evaluated, blessing, served) if regression else
                {"accuracy": evaluated["accuracy"], "threshold": opts.accuracy_threshold,
                 "slices": from_metric_values(evaluated),
                 "reason": blessing.get("reason"), "served": served or None},
        "blessed": bool(outputs["blessed"]),
        "export": {"base": export_base, **_export_record(outputs, blessing)},
        "wall_seconds": round(wall_seconds, 2),
    }


def _lowest_slice(slices: Dict[str, Dict[str, float]]) -> list:
    """The line naming the lowest-accuracy slice of `MIN_SLICE_EXAMPLES` or more examples."""
    from kfdist.components.common.wording import counted
    from kfdist.components.evaluate_model.slices import MIN_SLICE_EXAMPLES

    if not slices:
        return []
    big = {k: v for k, v in slices.items() if v["examples"] >= MIN_SLICE_EXAMPLES}
    if not big:
        return [f"slices: none has {MIN_SLICE_EXAMPLES} or more examples, too few to single one "
                "out (every slice in the evaluation's report)"]
    key, worst = min(big.items(), key=lambda item: (item[1]["accuracy"], -item[1]["examples"]))
    return [f"lowest-accuracy slice: {key} {worst['accuracy']:.4f} ("
            f"{counted(worst['examples'], 'example')}; of the slices of at least "
            f"{MIN_SLICE_EXAMPLES}; every slice in the evaluation's report)"]


def format_summary(summary: Dict[str, Any]) -> str:
    """A few lines a person reads at the end of `kfdist run`."""
    from kfdist.components.evaluate_model.fit_gap import accuracy_gap

    evaluation, export = summary["eval"], summary["export"]
    verdict = "blessed" if summary["blessed"] else "not blessed"
    served = evaluation.get("served") or {}
    against = (f"; served version {served['version']}: {served['accuracy']:.4f}"
               if served.get("accuracy") is not None else "")
    regression = evaluation.get("task") == "regression"
    lines = (regression_summary.verdict_lines(evaluation, summary["blessed"]) if regression else
             [f"held-out accuracy {evaluation['accuracy']:.4f} (threshold "
              f"{evaluation['threshold']}{against}): {verdict}"])
    trained = summary.get("train", {})
    if trained.get("kept_why"):
        lines.append(f"training {trained['kept_why']}")
    advice = trained.get("fit_advice")
    if advice is None and "fit_advice" not in trained:  # a program's run: the accuracies alone
        gap = accuracy_gap(trained.get("final_accuracy"), evaluation.get("accuracy"))
        advice = {"text": gap, "warning": True} if gap else None
    if advice:
        lines.append(f"{'warning' if advice['warning'] else 'note'}: {advice['text']}")
    if served.get("class_change"):
        lines.append(f"warning: the served model {served['path']} predicts other classes: "
                     f"{served['not_compared']}")
    elif served.get("not_compared"):
        lines.append(f"warning: the served model {served['path']} could not be compared, so "
                     f"the threshold alone decided: {served['not_compared']}")
    lines += [] if regression else _lowest_slice(evaluation.get("slices") or {})
    lines.append(f"model exported to {export['path']}" if export.get("exported")
                 else f"not exported: {export.get('reason')}")
    return "\n".join(lines + record_lines(summary, "done in"))


def record_lines(summary: Dict[str, Any], ended: str) -> List[str]:
    """A run's last lines: its reports, then how it `ended` ("done in", "failed after") and
    where its summary and logs are."""
    lines = [f"data report: {summary['data_report']}"] if summary.get("data_report") else []
    if summary.get("report"):
        lines.append(f"evaluation report: {summary['report']}")
    lines.append(f"{ended} {summary['wall_seconds']:.1f}s; summary: "
                 f"{os.path.join(summary['output_dir'], SUMMARY_FILE)}; every step's log: "
                 f"{summary['logs_dir']}/")
    return lines
