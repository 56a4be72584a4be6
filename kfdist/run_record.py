"""What every `kfdist run` leaves in its output directory, whether its pipeline succeeded or not.

`summary.json` (`run_summary.summarise` for a run that finished; `failed_summary`
for one that failed or was stopped: its id, each step's outcome, the failed
step's error line, last lines and log), and the data check's HTML page as
`data_report.html` beside it (and the evaluation's `report.html` when the
evaluation ran). kfp's executor prints each step's executor input
first in the step's log (`step_errors.executor_input`); it names the run's
directory and the dataset a step read, so a failed run's id and the data report
of a run whose shard step was cached are found from the logs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Any, Dict, Iterator, List, Optional, Tuple

from kfdist.run_summary import (
    DATA_REPORT_FILE, LOGS_DIR, REPORT_FILE, REPORT_OUTPUT, SUMMARY_FILE, record_lines)
from kfdist.step_errors import artifact_uri, executor_input
#: `summary.json`'s `status`: the pipeline ran to its end (blessed or not), a step failed, or
#: the run was stopped (SIGTERM, Ctrl-C).
SUCCEEDED, FAILED, STOPPED = "succeeded", "failed", "stopped"
#: The shard step's HTML output, and the copy of that page its dataset keeps.
SHARD_REPORT_OUTPUT, DATASET_REPORT_FILE = "data_report", "data_validation.html"


@dataclasses.dataclass(frozen=True)
class StepFailure:
    """Where and why a run ended before its pipeline did.

    Attributes:
      step: The step that failed or was running (`shard`, `train`, ...); None: not known.
      error: Its error line: the step's own last line, or what stopped the run.
      log: The step's whole log (the logs folder when the step is not known).
      last_lines: The step's last lines, as the console showed them.
      status: `FAILED` or `STOPPED`.
    """

    step: Optional[str]
    error: str
    log: str
    last_lines: Tuple[str, ...] = ()
    status: str = FAILED

    def message(self, pipeline: str) -> str:
        """The one line `kfdist run` ends with: the step, its error line, its whole log."""
        where = "its whole log" if self.step else "logs"
        return (f"pipeline {pipeline!r} failed in {self.step or 'a step'}: {self.error}; "
                f"{where}: {self.log}")


def step_failure(console, err: BaseException, engine_failed: bool = False) -> StepFailure:
    """The failure of the step kfp.local ran last, from what it printed.

    Args:
      console: The run's `run_console.RunConsole`.
      err: What kfp.local raised (its own `RuntimeError` names internal tasks such as
        `condition-1`, so the step's own last line is preferred).
      engine_failed: Whether the container engine failed the step's container.
    """
    from kfdist.run_console import FAILURE_TAIL_LINES, strip_colours

    step = console.failed_step or console.running_step
    tail = tuple(console.tail(step, FAILURE_TAIL_LINES)) if step else ()
    if engine_failed:
        error = f"the container engine failed the step's container: {err}"
    else:
        error = tail[-1] if tail else strip_colours(str(err))
    # The step names its parameters; the person typed the command's flags.
    error = console.wording(error)
    return StepFailure(step, error, console.log_path(step) if step else console.logs_dir, tail)


def stopped(console, reason: str) -> StepFailure:
    """The record of a run stopped by a signal while `console.running_step` ran."""
    step = console.running_step
    return StepFailure(step, reason, console.log_path(step) if step else console.logs_dir,
                       tuple(console.tail(step)) if step else (), status=STOPPED)


def _executor_inputs(console) -> Iterator[Dict[str, Any]]:
    """The executor input of each step that started, in the order they ran."""
    for step in [*console.outcomes, *([console.running_step] if console.running_step else [])]:
        found = executor_input(console.step_lines(step))
        if found is not None:
            yield found


def run_id(console) -> Optional[str]:
    """The run's id, kfp.local's directory of it under the pipeline root (None: no step
    started)."""
    for inputs in _executor_inputs(console):
        output_file = (inputs.get("outputs") or {}).get("outputFile")
        if output_file:
            return os.path.basename(os.path.dirname(os.path.dirname(output_file)))
    return None


def data_report_source(console) -> Optional[str]:
    """The data check's page of the run: the shard step's HTML output (written also when the
    check stopped it), or with a cached shard step the page in the dataset a later step read."""
    for inputs in _executor_inputs(console):
        written = artifact_uri(inputs, "outputs", SHARD_REPORT_OUTPUT)
        if written and os.path.isfile(written):
            return written
        dataset = artifact_uri(inputs, "inputs", "dataset")
        if dataset and os.path.isfile(os.path.join(dataset, DATASET_REPORT_FILE)):
            return os.path.join(dataset, DATASET_REPORT_FILE)
    return None


def _publish(source: Optional[str], output_dir: str, name: str) -> Optional[str]:
    """Copies `source` to `<output_dir>/<name>`; returns the copy's path (None: no source)."""
    if source is None:
        return None
    target = os.path.join(output_dir, name)
    shutil.copyfile(source, target)
    return target


def publish_data_report(console, output_dir: str) -> Optional[str]:
    """Copies the data check's page to `<output_dir>/data_report.html`; returns its path (None
    when the run has none: no step started, or images in a cached dataset)."""
    return _publish(data_report_source(console), output_dir, DATA_REPORT_FILE)


def publish_evaluation_report(console, output_dir: str) -> Optional[str]:
    """Copies the evaluation's report of a run that failed after it (in the export step) to
    `<output_dir>/report.html`; returns its path (None: the evaluation wrote none)."""
    for inputs in _executor_inputs(console):
        written = artifact_uri(inputs, "outputs", REPORT_OUTPUT)
        if written and os.path.isfile(written):
            return _publish(written, output_dir, REPORT_FILE)
    return None


def pipeline_steps(pipeline) -> List[str]:
    """The steps of `pipeline` (a kfp pipeline or loaded component), by their short names."""
    from kfdist.run_console import step_name

    return [step_name(task) for task in pipeline.pipeline_spec.root.dag.tasks]


def failed_summary(opts, failure: StepFailure, console, pipeline, *, source_uri: str,
                   export_base: str, output_dir: str, wall_seconds: float,
                   data_report: Optional[str], report: Optional[str] = None) -> Dict[str, Any]:
    """`summary.json` of a run that failed or was stopped: the keys of a finished run's
    (`run_summary.summarise`), with `failure` saying where and why and no figures.

    Args:
      opts: The run's `RunOptions`.
      failure: Where and why it ended.
      console: The run's `run_console.RunConsole` (each step's outcome, the logs).
      pipeline: The pipeline that ran (steps that never started are `not run`).
      source_uri: The data the run read.
      export_base: Where models are exported.
      output_dir: The run directory.
      wall_seconds: The run's wall time.
      data_report: The data check's page (`publish_data_report`).
      report: The evaluation's report, when the run failed after it
        (`publish_evaluation_report`).
    """
    from kfdist.run_console import NOT_RUN

    steps = {step: NOT_RUN for step in pipeline_steps(pipeline)}
    steps.update(console.outcomes)
    if failure.step and failure.status == STOPPED:
        steps[failure.step] = STOPPED
    ended = "was stopped" if failure.status == STOPPED else "failed"
    return {
        "status": failure.status,
        "run_id": run_id(console),
        "pipeline": opts.pipeline,
        "model_name": opts.serving_name,
        "steps": steps,
        "failure": {"step": failure.step, "error": failure.error, "log": failure.log,
                    "last_lines": list(failure.last_lines)},
        "report": report,
        "data_report": data_report,
        "data": source_uri,
        "output_dir": output_dir,
        "logs_dir": os.path.join(output_dir, LOGS_DIR),
        "train": None,
        "eval": None,
        "blessed": False,
        "export": {"base": export_base, "exported": False, "path": None, "version": None,
                   "reason": f"the run {ended} in {failure.step or 'a step'}"},
        "wall_seconds": round(wall_seconds, 2),
    }


def write_summary(summary: Dict[str, Any], output_dir: str) -> str:
    """Writes `summary` as `<output_dir>/summary.json`; returns its path."""
    path = os.path.join(output_dir, SUMMARY_FILE)
    with open(path, "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
    return path


def format_failure(summary: Dict[str, Any]) -> str:
    """The lines `kfdist run` prints when its run failed: where the record of it is."""
    return "\n".join(record_lines(summary, f"{summary['status']} after"))
