"""The benchmark command works on a checkout, and its parsers read what kfp.local prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarks import end_to_end
from benchmarks.__main__ import target_rows

KFP_LOCAL_LOG = """\
11:55:37.378 - INFO - Executing task \x1b[96m'shard-dataset'\x1b[0m
11:55:41.915 - INFO - Task \x1b[96m'shard-dataset'\x1b[0m finished with status \x1b[92mSUCCESS\x1b[0m
11:55:41.917 - INFO - Executing task \x1b[96m'train-distributed'\x1b[0m
[worker-0] epoch 1/1: accuracy=0.5
11:55:47.854 - INFO - Task \x1b[96m'train-distributed'\x1b[0m finished with status \x1b[92mSUCCESS\x1b[0m
"""


def test_step_times_come_from_kfp_local_log_lines():
    assert end_to_end.step_seconds(KFP_LOCAL_LOG) == {"shard-dataset": 4.54,
                                                      "train-distributed": 5.94}


def test_targets_are_judged_from_the_measures():
    rows = target_rows({"launcher": {"kfdist": {"reaction_seconds_max": 0.002}},
                        "end_to_end": {"kfdist_over_plain": 2.5}})
    assert [(r["measure"], r["met"]) for r in rows] == [("launcher", True), ("end_to_end", False)]


def test_the_launcher_benchmark_runs_and_writes_results(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--only", "launcher",
                           "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["command"] == "python -m benchmarks --quick --only launcher"
    launcher = result["measures"]["launcher"]
    assert launcher["kfdist"]["api_requests_per_job"] <= 10
    assert launcher["kfdist"]["reaction_seconds_max"] < 1.0
    assert "| launcher |" in (tmp_path / "results.md").read_text()
