"""The same `mnist` pipeline trains with every other strategy (kfp.local, real replicas).

`multi_worker_mirrored` is the README's main command (test_mnist_local.py);
here `mirrored`, `parameter_server` (chief + PS + 2 workers) and `horovod`
(mpirun, 2 ranks) each go through shard → train → evaluate → export and
reach the accuracy target, with the step's metrics in the summary.
"""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

RUNS = {
    "mirrored": ["--workers", "1"],
    "parameter_server": ["--workers", "2", "--ps", "1"],
    "horovod": ["--workers", "2", "--restart-policy", "OnFailure"],
}


@pytest.mark.parametrize("strategy", sorted(RUNS))
def test_pipeline_trains_with_strategy(strategy, tmp_path):
    out = str(tmp_path / "run")
    proc = subprocess.run(
        [sys.executable, "-m", "kfdist", "run", "mnist", "--strategy", strategy, *RUNS[strategy],
         "--output", out], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    assert summary["train"]["strategy"] == strategy
    assert summary["eval"]["accuracy"] >= 0.90
    assert summary["blessed"] is True and os.path.isdir(summary["export"]["path"])
    assert summary["train"]["restarts"] == 0
    log = proc.stdout + proc.stderr
    if strategy == "parameter_server":
        assert "[ps-0]" in log and "[chief-0]" in log
        assert summary["train"]["input_bound_fraction"] is None  # asynchronous steps: not measured
    else:
        assert 0.0 <= summary["train"]["input_bound_fraction"] <= 1.0
    if strategy == "horovod":
        assert "[rank-0]" in log and "[rank-1]" in log
