"""`kfdist run mnist` end to end: the blessing gate skips export, the shard step is cached.

Three real runs into one output directory, each a `kfdist run` subprocess:
1. a threshold no model can reach: evaluation runs, the export task is
   skipped by `dsl.If` (no serving directory, no export log);
2. the same command again: the shard step's cached output is reused (no new
   shard task directory; the console and the shard log say so);
3. `--no-cache --verbose`: the shard step runs again, and every line is printed.
"""

import glob
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

UNREACHABLE = ["--accuracy-threshold", "1.0"]
QUICK = ["--strategy", "mirrored", "--epochs", "1"]


def _run(out: str, *extra: str) -> "tuple[dict, str]":
    proc = subprocess.run([sys.executable, "-m", "kfdist", "run", "mnist", *QUICK, *UNREACHABLE,
                           "--output", out, *extra], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f), proc.stdout


def _shard_task_dirs(out: str) -> list:
    return glob.glob(os.path.join(out, "pipeline_root", "*", "shard-dataset"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("gated"))
    first = _run(out)
    first_logs = sorted(os.listdir(os.path.join(out, "logs")))
    first_shards = _shard_task_dirs(out)
    second = _run(out)
    second_shards = _shard_task_dirs(out)
    with open(os.path.join(out, "logs", "shard.log")) as f:
        second_shard_log = f.read()
    third = _run(out, "--no-cache", "--verbose")
    return dict(out=out, first=first, first_logs=first_logs, first_shards=first_shards,
                second=second, second_shards=second_shards, second_shard_log=second_shard_log,
                third=third, third_shards=_shard_task_dirs(out))


def test_an_unblessed_model_is_not_exported_and_the_export_task_is_skipped(runs):
    summary, printed = runs["first"]
    assert summary["blessed"] is False and summary["eval"]["accuracy"] < 1.0
    assert summary["export"]["exported"] is False and summary["export"]["path"] is None
    assert "  export    skipped: the model is not blessed" in printed.splitlines()
    assert "export.log" not in runs["first_logs"]  # never started, not run-and-noop
    assert not os.path.exists(os.path.join(runs["out"], "serving"))
    with open(os.path.join(runs["out"], "logs", "pipeline.log")) as f:
        assert "Skipping conditional task condition-1" in f.read()


def test_a_second_identical_run_reuses_the_cached_shard_output(runs):
    assert len(runs["first_shards"]) == 1
    assert runs["second_shards"] == runs["first_shards"]  # no second shard task ran
    summary, printed = runs["second"]
    assert any(line.startswith("  shard     cached: reused the output of an earlier run")
               for line in printed.splitlines()), printed
    assert not any(line.startswith("  shard     started") for line in printed.splitlines())
    assert "cache hit" in runs["second_shard_log"]
    assert summary["blessed"] is False  # the rest of the pipeline ran on the cached dataset


def test_no_cache_runs_the_shard_step_again_and_verbose_prints_everything(runs):
    assert len(runs["third_shards"]) == 2
    _, printed = runs["third"]
    _, quiet = runs["first"]
    assert "KFP Executor" in printed and "KFP Executor" not in quiet
    assert len(printed.splitlines()) > 3 * len(quiet.splitlines())
    assert len(quiet.splitlines()) < 60
