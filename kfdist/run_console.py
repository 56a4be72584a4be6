"""What `kfdist run` shows while kfp.local runs a pipeline, and where every line is kept.

kfp.local prints everything to this process's stdout: its own log records
(`Executing task 'train-distributed'`, executor inputs, outputs), and each
step subprocess's output, indented. `RunConsole` takes all of it, files each
line under `<logs_dir>/<step>.log` (`pipeline.log` for lines outside a step),
and shows one line as each step starts and ends with the figure that
matters, a progress bar of the training epochs, and what a failed step
printed last. `verbose` also echoes every line as it comes.
"""

from __future__ import annotations

import ast
import contextlib
import io
import logging
import os
import sys
import time
from typing import Callable, Dict, List, Optional, TextIO

from kfdist.components.train_distributed.job.epoch_line import parse_epoch_line
from kfdist.pipelines.step_pods import CONDITIONAL_STEPS, STEP_NAMES
from kfdist.step_errors import (
    printed_lines, without_executor_lines, without_kfdist_traceback)
from kfdist.step_figures import step_figure
from kfdist import kfp_local_lines

PIPELINE_LOG = "pipeline"
#: Lines of a failed step's log shown on the console.
FAILURE_TAIL_LINES = 20
#: At most this many progress lines per training step when the console is not a terminal.
PLAIN_PROGRESS_LINES = 10
BAR_WIDTH = 20

#: What became of a step (`RunConsole.outcomes`): NOT_RUN, an earlier step failed.
SUCCEEDED, FAILED, CACHED, SKIPPED, NOT_RUN = "succeeded", "failed", "cached", "skipped", "not run"


def strip_colours(text: str) -> str:
    """`text` without the ANSI colour codes kfp.local puts around task names."""
    return kfp_local_lines.ANSI.sub("", text)


def step_name(task: str) -> str:
    """The short step name of a kfp task (`train-distributed` → `train`); a condition's own
    task (`condition-1`) is named after the step it gates."""
    return CONDITIONAL_STEPS.get(task, (STEP_NAMES.get(task, task),))[0]


class RunConsole:
    """Routes kfp.local's output into per-step log files and a short console view.

    Use as a context manager around the pipeline call; it replaces
    `sys.stdout`, `sys.stderr` and the root logger's handlers meanwhile.

    Args:
      logs_dir: Directory for `<step>.log` files (created; old ones replaced).
      out: Where the short view goes (the real stdout by default).
      verbose: Also echo every line to `out` as it comes.
      tty: Whether `out` is a terminal (a live progress bar); default: asked of `out`.
      wording: Rewrites a step's figure as the command's user reads it (its parameters as
        the command's flags: `flag_wording.command_wording`); default: as the step said it.
    """

    def __init__(self, logs_dir: str, out: Optional[TextIO] = None, verbose: bool = False,
                 tty: Optional[bool] = None,
                 wording: Optional[Callable[[str], str]] = None):
        self.logs_dir = logs_dir
        self.wording = wording or (lambda text: text)
        self.out = out or sys.stdout
        self.verbose = verbose
        self.tty = self.out.isatty() if tty is None else tty
        self.outputs: Dict[str, Dict[str, object]] = {}
        self.failed_step: Optional[str] = None
        #: Each step's outcome so far: SUCCEEDED, FAILED, CACHED, SKIPPED or NOT_RUN.
        self.outcomes: Dict[str, str] = {}
        self._files: Dict[str, TextIO] = {}
        self._step: Optional[str] = None
        self._started = 0.0
        self._outputs_of: Optional[str] = None
        self._last_artifact: Optional[str] = None
        self._bar_open = False
        self._progress_shown = -1
        self._epochs_seen = 0
        self._partial = ""
        self._seconds: Dict[str, float] = {}
        self._stack = contextlib.ExitStack()

    # ---- context --------------------------------------------------------------------------

    def __enter__(self) -> "RunConsole":
        os.makedirs(self.logs_dir, exist_ok=True)
        for name in os.listdir(self.logs_dir):
            if name.endswith(".log"):
                os.remove(os.path.join(self.logs_dir, name))
        sink = _LineSink(self)
        self._stack.enter_context(contextlib.redirect_stdout(sink))
        self._stack.enter_context(contextlib.redirect_stderr(sink))
        root = logging.getLogger()
        saved = (root.handlers[:], root.level)
        handler = logging.StreamHandler(sink)
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.handlers[:] = [handler]
        root.setLevel(logging.INFO)
        self._stack.callback(lambda: (root.handlers.__setitem__(slice(None), saved[0]),
                                      root.setLevel(saved[1])))
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()
        if self._partial:
            self.feed_text("\n")
        self._close_bar()
        for f in self._files.values():
            f.close()
        self._files.clear()

    @property
    def running_step(self) -> Optional[str]:
        """The step that has started and not finished, if any."""
        return self._step

    def log_path(self, step: str) -> str:
        """Where the lines of `step` are kept."""
        return os.path.join(self.logs_dir, f"{step}.log")

    # ---- input ----------------------------------------------------------------------------

    def feed_text(self, text: str) -> None:
        """Takes text as written to stdout; whole lines are handled as they complete."""
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self.feed(line)

    def feed(self, raw: str) -> None:
        """Handles one line of kfp.local's output."""
        line = strip_colours(raw).rstrip("\r")
        message = kfp_local_lines.RECORD_PREFIX.sub("", line)
        if self.verbose:
            self._show(line)
        if (m := kfp_local_lines.STARTED.search(message)) is not None:
            self._start(step_name(m["task"]))
        if (m := kfp_local_lines.OUTPUTS.search(message)) is not None:
            self._outputs_of = step_name(m["task"])
            self.outputs[self._outputs_of] = {}
            self._write(self._outputs_of, line)
            return
        cache_hit = kfp_local_lines.CACHE_HIT.search(message)
        self._write(step_name(cache_hit["task"]) if cache_hit else
                    self._step or self._outputs_of or PIPELINE_LOG, line)
        if (m := kfp_local_lines.FINISHED.search(message)) is not None:
            self._finish(step_name(m["task"]), m["status"])
        elif self._outputs_of is not None:
            self._take_output(line)
        elif (m := kfp_local_lines.NO_OUTPUTS.search(message)) is not None:
            self._show_done(step_name(m["task"]))
        elif cache_hit is not None:
            self.outcomes[step_name(cache_hit["task"])] = CACHED
            self._say(step_name(cache_hit["task"]), "cached: reused the output of an earlier run "
                                                    "with the same inputs (--no-cache to run it again)")
        elif (m := kfp_local_lines.CONDITION_SKIPPED.search(message)) is not None:
            step, why = CONDITIONAL_STEPS.get(m["task"], (m["task"], "its condition is false"))
            self.outcomes[step] = SKIPPED
            self._say(step, f"skipped: {why}")
        elif (m := kfp_local_lines.UPSTREAM_FAILED.search(message)) is not None:
            self.outcomes[step_name(m["task"])] = NOT_RUN
            self._say(step_name(m["task"]), "not run: an earlier step failed")
        elif self._step is not None and (progress := parse_epoch_line(message)) is not None:
            self._epoch(progress)

    # ---- steps ----------------------------------------------------------------------------

    def _start(self, step: str) -> None:
        self._step, self._started, self._outputs_of = step, time.monotonic(), None
        self._progress_shown, self._epochs_seen = -1, 0
        self._say(step, "started")

    def _finish(self, step: str, status: str) -> None:
        seconds = time.monotonic() - self._started
        self._step = None
        self.outcomes[step] = SUCCEEDED if status == "SUCCESS" else FAILED
        if status == "SUCCESS":
            self._seconds[step] = seconds  # shown with the figure, once the outputs are read
            return
        self.failed_step = step
        self._say(step, f"FAILED after {seconds:.1f}s; the last lines of its log:")
        for tail_line in self.tail(step):
            self._show(f"    {tail_line}")
        self._show(f"  whole log: {self.log_path(step)}")

    def _take_output(self, line: str) -> None:
        step = self._outputs_of
        values = self.outputs[step]
        if kfp_local_lines.RULE.match(line.strip()):
            self._outputs_of = None
            return self._show_done(step)
        if (m := kfp_local_lines.OUTPUT_ARTIFACT.match(line)) is not None:
            self._last_artifact = m["key"]
            values[m["key"]] = {}
        elif ((m := kfp_local_lines.ARTIFACT_METADATA.search(line)) is not None
              and self._last_artifact):
            values[self._last_artifact] = _literal(m["metadata"], {})
        elif (m := kfp_local_lines.OUTPUT_PARAM.match(line)) is not None:
            values[m["key"]] = _literal(m["value"], m["value"])

    def _show_done(self, step: str) -> None:
        seconds = self._seconds.get(step, 0.0)
        figure = step_figure(step, self.outputs.get(step, {}), epochs=self._epochs_seen)
        self._say(step, f"done in {seconds:.1f}s" + (f": {self.wording(figure)}" if figure else ""))

    def _epoch(self, progress) -> None:
        self._epochs_seen = max(self._epochs_seen, progress.epoch)
        bar = _bar(progress.epoch, progress.epochs)
        # val_: held out, each epoch; a regression's RMSE in place of the accuracy
        shown_metrics = ("accuracy", "rmse", "loss", "val_accuracy", "val_rmse")
        figures = "  ".join(f"{k} {progress.metrics[k]:.4f}" for k in shown_metrics
                            if k in progress.metrics)
        text = f"  {'train':<9} {bar} epoch {progress.epoch}/{progress.epochs}  {figures}"
        if self.tty:
            self.out.write("\r" + text.ljust(78))
            self.out.flush()
            self._bar_open = True
            return
        shown = progress.epoch * PLAIN_PROGRESS_LINES // max(progress.epochs, 1)
        if shown > self._progress_shown:
            self._progress_shown = shown
            self._show(text)

    def step_lines(self, step: str) -> List[str]:
        """Every line `step`'s process printed, so far (`step_errors.printed_lines`)."""
        if step in self._files:
            self._files[step].flush()
        return printed_lines(self.log_path(step))

    def tail(self, step: str, lines: int = FAILURE_TAIL_LINES) -> List[str]:
        """The last lines `step` printed itself (kfp's records, its executor's input and kfdist
        errors' tracebacks left out)."""
        return without_kfdist_traceback(without_executor_lines(self.step_lines(step)))[-lines:]

    # ---- output ---------------------------------------------------------------------------

    def _write(self, step: str, line: str) -> None:
        f = self._files.get(step)
        if f is None:
            # Line-buffered: `tail -f` on a step's log follows it while the step runs.
            f = self._files[step] = open(self.log_path(step), "a", encoding="utf-8", buffering=1)
        f.write(line + "\n")

    def _say(self, step: str, text: str) -> None:
        if not self.verbose:
            self._show(f"  {step:<9} {text}")
        else:
            self._show(f"kfdist: {step} {text}")

    def _show(self, text: str) -> None:
        self._close_bar()
        self.out.write(text + "\n")
        self.out.flush()

    def _close_bar(self) -> None:
        if self._bar_open:
            self._bar_open = False
            self.out.write("\n")


class _LineSink(io.TextIOBase):
    """A text stream that hands what is written to it to a `RunConsole`."""

    def __init__(self, console: RunConsole):
        self._console = console

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._console.feed_text(text)
        return len(text)


def _bar(done: int, total: int) -> str:
    filled = BAR_WIDTH * min(done, total) // max(total, 1)
    return "[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]"


def _literal(text: str, default):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return default
