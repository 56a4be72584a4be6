"""`kfdist run`'s console: kfp.local's output filed per step, a short view shown.

The text fed here has the shape kfp.local 2.17 prints (coloured task names,
timestamped records, step output indented by 4, an outputs block closed by a
rule); the e2e tests run the real thing.
"""

from __future__ import annotations

import io
import logging
import sys

from kfdist.components.train_distributed.job.epoch_line import format_epoch_line, parse_epoch_line
from kfdist.run_console import RunConsole

CYAN, GREEN, RED, RESET = "\x1b[96m", "\x1b[92m", "\x1b[91m", "\x1b[0m"
RULE = "-" * 80


def _task(name: str) -> str:
    return f"{CYAN}'{name}'{RESET}"


def _successful_step(task: str, body: list, outputs: list) -> str:
    return "\n".join([
        f"00:02:42.100 - INFO - Executing task {_task(task)}",
        "00:02:42.100 - INFO - Streamed logs:", "",
        *[f"    {line}" for line in body],
        "    [KFP Executor 2026-11-22 00:02:45,000 INFO]: Wrote executor output file.",
        "", f"00:02:47.000 - INFO - Task {_task(task)} finished with status {GREEN}SUCCESS{RESET}",
        f"00:02:47.010 - INFO - Task {_task(task)} outputs:", *outputs, RULE, ""])


SHARD = _successful_step(
    "shard-dataset", ["2026-11-22 00:02:44 WARNING tensorflow C++ start-up noise",
                      "dataset written to /x/dataset in 1.2s"],
    ["    dataset: Dataset( name='dataset',",
     "                      uri='/x/pipeline_root/run/shard-dataset/dataset',",
     "                      metadata={'train_examples': 1429.0, 'eval_examples': 368.0, "
     "'train_shards': 4.0, 'feature': 'image', 'split': 'predefined'} )"])
TRAIN = _successful_step(
    "train-distributed",
    [f"[worker-{w}] " + format_epoch_line(e, 10, {"accuracy": 0.5 + e / 40, "loss": 1.0 / e},
                                          9000.0, 0.2)
     for e in range(1, 11) for w in (0,)] + ["[worker-1] replica worker:1 done"],
    ["    metrics: Metrics( name='metrics',",
     "                      uri='/x/m',",
     "                      metadata={'final_accuracy': 0.975, 'examples_per_second': 8401.2, "
     "'restarts': 0.0, 'training_seconds': 7.46} )",
     "    model: Model( name='model',", "                  uri='/x/model',",
     "                  metadata={'framework': 'tensorflow'} )"])
EVALUATE = _successful_step(
    "evaluate-model", ["accuracy=0.4000 loss=2.0 over 368 examples; not blessed"],
    ["    Output: False",
     "    blessing: Artifact( name='blessing',", "                        uri='/x/b',",
     "                        metadata={'blessed': False, 'reason': 'accuracy 0.400 < threshold "
     "0.990', 'accuracy': 0.4} )"])
SKIPPED = "Skipping conditional task condition-1 (condition evaluated to False)\n"


def _run(text: str, tmp_path, **kwargs):
    out = io.StringIO()
    with RunConsole(str(tmp_path / "logs"), out=out, **kwargs) as console:
        for i in range(0, len(text), 7):  # arrives in pieces, not whole lines
            sys.stdout.write(text[i:i + 7])
    return console, out.getvalue().rstrip("\n").split("\n")  # "\r" redraws stay in their line


def test_each_step_shows_a_start_line_and_its_figure(tmp_path):
    console, shown = _run(SHARD + TRAIN + EVALUATE + SKIPPED, tmp_path)
    assert shown[0] == "  shard     started"
    assert shown[1].startswith("  shard     done in ")
    assert shown[1].endswith(": 1,797 examples written (1,429 train in 4 shards, 368 eval: "
                             "the source's own split)")
    # the step's time, and the share of it model.fit took
    assert shown[-4].endswith("10 epochs, 7.5s of it in model.fit, training accuracy 0.9750, "
                              "8,401 examples/s")
    assert shown[-2].endswith("held-out accuracy 0.400 < threshold 0.990: not blessed")
    assert shown[-1] == "  export    skipped: the model is not blessed"
    assert not [line for line in shown if "KFP Executor" in line or "C++" in line]
    assert console.failed_step is None


def test_epochs_show_as_at_most_ten_progress_lines_off_a_terminal(tmp_path):
    _, shown = _run(TRAIN, tmp_path, tty=False)
    bars = [line for line in shown if "epoch " in line and "[" in line]
    assert len(bars) == 10
    assert bars[0].startswith("  train     [##..................] epoch 1/10  accuracy 0.5250")
    assert bars[-1].startswith("  train     [####################] epoch 10/10")


def test_on_a_terminal_the_progress_bar_is_redrawn_in_place(tmp_path):
    _, shown = _run(TRAIN, tmp_path, tty=True)
    [bar_line] = [line for line in shown if "\r" in line]
    assert bar_line.count("\r") == 10 and "epoch 10/10" in bar_line.split("\r")[-1]


def test_every_line_is_kept_in_its_step_log(tmp_path):
    _run(SHARD + TRAIN + EVALUATE + SKIPPED, tmp_path)
    logs = tmp_path / "logs"
    assert sorted(p.name for p in logs.iterdir()) == ["evaluate.log", "pipeline.log",
                                                      "shard.log", "train.log"]
    shard = (logs / "shard.log").read_text()
    assert "C++ start-up noise" in shard and "KFP Executor" in shard
    assert "metadata={'train_examples': 1429.0" in shard and "\x1b[" not in shard
    assert (logs / "train.log").read_text().count("] epoch ") == 10
    assert "Skipping conditional task condition-1" in (logs / "pipeline.log").read_text()


def test_verbose_echoes_every_line(tmp_path):
    _, quiet = _run(SHARD, tmp_path)
    _, loud = _run(SHARD, tmp_path, verbose=True)
    assert len(loud) > len(quiet) + 5
    assert any("KFP Executor" in line for line in loud)
    assert any(line.startswith("kfdist: shard done in") for line in loud)


def test_a_failed_step_shows_its_last_lines_and_where_its_log_is(tmp_path):
    failing = "\n".join([
        f"00:02:42.100 - INFO - Executing task {_task('train-distributed')}",
        *[f"    [worker-0] noise line {i}" for i in range(40)],
        "    [worker-1] ValueError: the real reason",
        f"00:02:47.000 - ERROR - Task {_task('train-distributed')} finished with status "
        f"{RED}FAILURE{RESET}", ""])
    console, shown = _run(failing, tmp_path)
    assert console.failed_step == "train"
    start = shown.index(next(line for line in shown if "FAILED after" in line))
    tail = shown[start + 1:-1]
    assert len(tail) == 20 and tail[-1] == "    [worker-1] ValueError: the real reason"
    assert shown[-1] == f"  whole log: {tmp_path / 'logs' / 'train.log'}"


def test_a_cache_hit_is_said_and_logged(tmp_path):
    out = io.StringIO()
    with RunConsole(str(tmp_path / "logs"), out=out):
        logging.getLogger().info("Task shard-dataset cache hit (key=1fef3edc32fe); "
                                 "skipping execution.")
    assert out.getvalue().startswith("  shard     cached: reused the output of an earlier run")
    assert "cache hit" in (tmp_path / "logs" / "shard.log").read_text()


def test_old_logs_are_replaced_and_streams_restored(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "export.log").write_text("an earlier run's export\n")
    stdout, handlers = sys.stdout, logging.getLogger().handlers[:]
    _run(SHARD, tmp_path)
    assert not (tmp_path / "logs" / "export.log").exists()
    assert sys.stdout is stdout and logging.getLogger().handlers == handlers


def test_epoch_lines_round_trip():
    line = "[rank-0] " + format_epoch_line(3, 10, {"loss": 0.25, "accuracy": 0.9}, 1234.4, 1.25)
    progress = parse_epoch_line(line)
    assert (progress.epoch, progress.epochs, progress.seconds) == (3, 10, 1.2)
    assert progress.metrics == {"accuracy": 0.9, "loss": 0.25, "examples/s": 1234.0}
    assert parse_epoch_line("[worker-0] replica worker:0 done") is None


def test_epoch_lines_carry_the_validation_metrics():
    line = "[worker-0] " + format_epoch_line(
        2, 5, {"loss": 0.25, "accuracy": 0.9, "val_loss": 0.3125, "val_accuracy": 0.875}, 900.0, 0.5)
    assert "val_accuracy=0.8750" in line
    progress = parse_epoch_line(line)
    assert (progress.epoch, progress.epochs, progress.seconds) == (2, 5, 0.5)
    assert progress.metrics == {"accuracy": 0.9, "loss": 0.25, "val_accuracy": 0.875,
                                "val_loss": 0.3125, "examples/s": 900.0}


def test_a_failed_step_shows_a_kfdist_errors_message_without_its_traceback(tmp_path):
    message = ("the model does not fit the dataset: it takes 'input_1' float32 [batch, 4]; "
               "the dataset holds 28x28 images")
    failing = "\n".join([
        f"00:02:42.100 - INFO - Executing task {_task('train-program')}",
        "    [worker-0] 1/1 - 0s - loss: 1.2507 - accuracy: 0.3125",
        "    Traceback (most recent call last):",
        '      File "/x/kfp/dsl/executor.py", line 453, in execute',
        "        result = self.func(**func_kwargs)",
        '      File "/x/components/launch_program/program_step.py", line 136, in train_program',
        "        raise TrainingFailedError(",
        f"    kfdist.components.common.errors.TrainingFailedError: {message}",
        f"00:02:47.000 - ERROR - Task {_task('train-program')} finished with status "
        f"{RED}FAILURE{RESET}",
        "Skipping task evaluate-model: upstream task failed.",
        "Skipping task condition-1: upstream task failed.", ""])
    console, shown = _run(failing, tmp_path)
    start = shown.index(next(line for line in shown if "FAILED after" in line))
    assert shown[start + 1:start + 3] == [
        "    [worker-0] 1/1 - 0s - loss: 1.2507 - accuracy: 0.3125",
        f"    TrainingFailedError: {message}"]
    assert not [line for line in shown if "Traceback" in line or "File " in line]
    assert "Traceback" in (tmp_path / "logs" / "train-program.log").read_text()  # kept there
    assert shown[-2:] == ["  evaluate  not run: an earlier step failed",
                          "  export    not run: an earlier step failed"]
    assert not [line for line in shown if "condition-" in line]
    assert console.outcomes == {"train-program": "failed", "evaluate": "not run",
                                "export": "not run"}


def test_other_errors_keep_their_traceback(tmp_path):
    failing = "\n".join([
        f"00:02:42.100 - INFO - Executing task {_task('evaluate-model')}",
        "    Traceback (most recent call last):",
        '      File "/x/eval_predictions.py", line 124, in predict',
        "    ValueError: Input 0 of layer is incompatible",
        f"00:02:47.000 - ERROR - Task {_task('evaluate-model')} finished with status "
        f"{RED}FAILURE{RESET}", ""])
    _, shown = _run(failing, tmp_path)
    assert "    Traceback (most recent call last):" in shown


def test_every_steps_outcome_is_kept(tmp_path):
    console, _ = _run(SHARD + TRAIN + EVALUATE + SKIPPED, tmp_path)
    assert console.outcomes == {"shard": "succeeded", "train": "succeeded",
                                "evaluate": "succeeded", "export": "skipped"}
