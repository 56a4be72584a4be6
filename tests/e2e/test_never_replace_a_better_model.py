"""`kfdist run tabular` three times into one export base: a worse model never replaces a better one.

The first two runs are the block of docs/guide/pipelines.md ("Never replace a better model"),
run as written (`blocks_run_by`) in a fresh directory.

Real runs, each a `kfdist run` subprocess on the penguins sample (one process trains):
1. 20 epochs, nothing served yet: blessed on the threshold, and the reason says no model is
   served; exported as the first version;
2. 1 epoch: above the threshold but worse than the served version on the same held-out
   examples: not blessed, no new version; the console, `summary.json` and the report say why,
   the report and the metrics show both models overall and per slice;
3. 20 epochs without the `year` column: the served version takes a `year` input this dataset no
   longer has, so it is named and not compared; the threshold alone blesses it, and it says so.
"""

import glob
import json
import os
import subprocess
import sys

import pytest

from doc_shell_blocks import blocks_run_by, kfdist_commands

pytestmark = pytest.mark.slow
[DOC_BLOCK] = blocks_run_by(__file__)

COMMON = ["tabular", "--strategy", "mirrored", "--accuracy-threshold", "0.5",
          "--slice-columns", "island"]
#: The bundled sample, penguins.csv, names the served model.
SERVED = "penguins"


def _run(out: str, *extra: str) -> "tuple[dict, str]":
    proc = subprocess.run([sys.executable, "-m", "kfdist", "run", *COMMON, "--output", out,
                           *extra], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f), proc.stdout


def _versions(out: str) -> list:
    return sorted(os.listdir(os.path.join(out, "serving", SERVED)))


def _latest_evaluation(out: str) -> str:
    """The evaluate task directory of the latest run."""
    return sorted(glob.glob(os.path.join(out, "pipeline_root", "*", "evaluate-model")))[-1]


def _run_as_written(cwd: str, args: list) -> "tuple[dict, str]":
    proc = subprocess.run([sys.executable, "-m", "kfdist", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    out = os.path.join(cwd, args[args.index("--output") + 1])
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f), proc.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cwd = str(tmp_path_factory.mktemp("champion"))
    first_args, second_args = kfdist_commands(DOC_BLOCK)
    out = os.path.join(cwd, first_args[first_args.index("--output") + 1])
    assert second_args[second_args.index("--output") + 1] == os.path.relpath(out, cwd)
    first = _run_as_written(cwd, first_args)
    after_first = _versions(out)
    second = _run_as_written(cwd, second_args)
    after_second = _versions(out)
    second_evaluation = _latest_evaluation(out)
    third = _run(out, "--epochs", "20", "--exclude-columns", "year")
    return dict(out=out, first=first, second=second, third=third, after_first=after_first,
                after_second=after_second, after_third=_versions(out),
                second_evaluation=second_evaluation)


def test_the_first_model_is_blessed_on_the_threshold_as_nothing_is_served(runs):
    summary, printed = runs["first"]
    assert summary["blessed"] is True and summary["export"]["exported"] is True
    assert summary["eval"]["served"] is None
    root = os.path.join(runs["out"], "serving", SERVED)
    assert f"no served model under {root} to compare with" in summary["eval"]["reason"]
    assert f"no served model under {root}" in printed
    assert len(runs["after_first"]) == 1


def test_a_worse_model_above_the_threshold_is_not_blessed_nor_exported(runs):
    summary, printed = runs["second"]
    first_accuracy = runs["first"][0]["eval"]["accuracy"]
    assert 0.5 <= summary["eval"]["accuracy"] < first_accuracy  # worse, above the threshold
    assert summary["blessed"] is False and summary["export"]["exported"] is False
    assert runs["after_second"] == runs["after_first"]  # no new version directory
    served = summary["eval"]["served"]
    assert served["version"] == int(runs["after_first"][0])
    assert served["accuracy"] == first_accuracy  # the same model on the same examples
    assert served["accuracy_change"] == pytest.approx(summary["eval"]["accuracy"] - first_accuracy)
    why = f"but the served version {served['version']} scores {first_accuracy:.3f}"
    assert why in summary["eval"]["reason"] and why in summary["export"]["reason"]
    evaluate_line = next(line for line in printed.splitlines() if line.startswith("  evaluate  done"))
    assert why in evaluate_line and "not good enough to replace it" in evaluate_line
    assert evaluate_line.endswith(": not blessed")
    assert f"served version {served['version']}: {first_accuracy:.4f}): not blessed" in printed


def test_the_report_and_metrics_show_both_models_overall_and_per_slice(runs):
    summary, _ = runs["second"]
    evaluation = runs["second_evaluation"]
    with open(os.path.join(evaluation, "report")) as f:
        page = f.read()
    assert "Against the served model" in page and "<th>served</th><th>change</th>" in page
    with open(os.path.join(evaluation, "summary")) as f:
        markdown = f.read()
    assert "| slice | examples | new | served | change |" in markdown
    assert "| `island=Dream` |" in markdown
    with open(os.path.join(evaluation, "executor_output.json")) as f:
        metadata = json.load(f)["artifacts"]["metrics"]["artifacts"][0]["metadata"]
    assert metadata["served_accuracy"] == summary["eval"]["served"]["accuracy"]
    assert metadata["accuracy_change"] == pytest.approx(summary["eval"]["served"]["accuracy_change"])
    assert "served_accuracy[island=Dream]" in metadata and "accuracy[island=Dream]" in metadata


def test_a_served_model_of_other_inputs_is_named_and_not_compared(runs):
    summary, printed = runs["third"]
    served_path = os.path.join(runs["out"], "serving", SERVED, runs["after_first"][0])
    reason = summary["eval"]["reason"]
    assert f"the served model {served_path} could not be compared" in reason
    assert "'year' float32" in reason  # what it takes that the dataset no longer holds
    assert summary["eval"]["served"] == {"path": served_path,
                                         "not_compared": summary["eval"]["served"]["not_compared"]}
    assert summary["blessed"] is True and summary["export"]["exported"] is True
    assert len(runs["after_third"]) == 2
    assert (f"warning: the served model {served_path} could not be compared, so the threshold "
            "alone decided" in printed)
