"""The same `mnist` pipeline trains with every other strategy (kfp.local, real replicas).

`multi_worker_mirrored` is the README's main command (test_mnist_local.py);
here `kfdist run mnist --strategy S` with no other option, for `mirrored`
(1 worker), `parameter_server` (chief + 1 PS + 2 workers) and `horovod`
(mpirun, 2 ranks, restart policy OnFailure), each goes through shard → train
→ evaluate → export and reaches the accuracy target, with the step's metrics
in the summary.
"""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

#: What each strategy runs with when nothing else is said: workers, ps, restart policy.
DEFAULTS = {
    "mirrored": (1, 0, "ExitCode"),
    "parameter_server": (2, 1, "ExitCode"),
    "horovod": (2, 0, "OnFailure"),
}


@pytest.mark.parametrize("strategy", sorted(DEFAULTS))
def test_pipeline_trains_with_strategy_and_its_defaults(strategy, tmp_path):
    out = str(tmp_path / "run")
    proc = subprocess.run(
        [sys.executable, "-m", "kfdist", "run", "mnist", "--strategy", strategy, "--output", out],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    assert summary["train"]["strategy"] == strategy
    train = summary["train"]
    assert (train["workers"], train["ps"], train["restart_policy"]) == DEFAULTS[strategy]
    assert summary["eval"]["accuracy"] >= 0.90
    assert summary["blessed"] is True and os.path.isdir(summary["export"]["path"])
    assert summary["train"]["restarts"] == 0
    log = "".join(open(os.path.join(out, "logs", name)).read()
                  for name in sorted(os.listdir(os.path.join(out, "logs"))))
    if strategy == "parameter_server":
        assert "[ps-0]" in log and "[chief-0]" in log
        assert summary["train"]["input_bound_fraction"] is None  # asynchronous steps: not measured
    else:
        assert 0.0 <= summary["train"]["input_bound_fraction"] <= 1.0
    if strategy == "horovod":
        assert "[rank-0]" in log and "[rank-1]" in log
